import Foundation

/// One of Apple's server-to-server notifications for Sign in with Apple, verified.
///
/// Apple POSTs `{"payload": "<JWS>"}` to the endpoint registered for an app; the JWS's
/// `events` claim is a JSON string holding the event itself.
public struct AppleNotification: Sendable, Equatable {
    /// The token's unique id (`jti`): notifications are de-duplicated by it.
    public var id: String
    /// The app it was sent to (its `aud`, one of the configured client_ids).
    public var clientID: String
    /// `iss`, one of the accepted issuers.
    public var issuer: String
    /// `iat`.
    public var issuedAt: Date
    /// `exp`, when Apple sent one.
    public var expires: Date?
    /// The key that signed it.
    public var keyID: String
    /// The event's type, with Apple's two spellings of the account deletion folded into one.
    public var type: AppleNotificationType
    /// The type exactly as Apple spelled it.
    public var typeAsSent: String
    /// The Apple user id (`sub`) the event is about.
    public var userID: String
    /// When the event happened.
    public var eventTime: Date
    /// The user's (relay) email address, when Apple included one.
    public var email: String?
    /// Whether that address is Apple's private relay; Apple sends a boolean or a string.
    public var isPrivateEmail: Bool?

    public init(
        id: String,
        clientID: String,
        issuer: String,
        issuedAt: Date,
        expires: Date?,
        keyID: String,
        type: AppleNotificationType,
        typeAsSent: String,
        userID: String,
        eventTime: Date,
        email: String?,
        isPrivateEmail: Bool?
    ) {
        self.id = id
        self.clientID = clientID
        self.issuer = issuer
        self.issuedAt = issuedAt
        self.expires = expires
        self.keyID = keyID
        self.type = type
        self.typeAsSent = typeAsSent
        self.userID = userID
        self.eventTime = eventTime
        self.email = email
        self.isPrivateEmail = isPrivateEmail
    }
}

/// The type of an Apple notification's event. Types Apple may add later are kept as sent
/// (lower-case letters, digits and hyphens), so a verified notification is never refused for
/// its type alone.
public struct AppleNotificationType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Accepts any well-formed type; `account-deleted` becomes ``accountDeleted``.
    public init?(rawValue: String) {
        guard Self.isWellFormed(rawValue) else { return nil }
        self.rawValue = rawValue == "account-deleted" ? Self.accountDeleted.rawValue : rawValue
    }
    private init(known: String) { rawValue = known }

    /// The user stopped using Sign in with Apple with the app: its grants are revoked.
    public static let consentRevoked = Self(known: "consent-revoked")
    /// The user deleted their Apple account (also sent as `account-deleted`): the app must
    /// delete the user's data; every grant is gone.
    public static let accountDeleted = Self(known: "account-delete")
    /// The user stopped receiving email through the private relay.
    public static let emailDisabled = Self(known: "email-disabled")
    /// The user receives email through the private relay again.
    public static let emailEnabled = Self(known: "email-enabled")
    /// The types Apple documents.
    public static let known: [Self] = [.consentRevoked, .accountDeleted, .emailDisabled, .emailEnabled]

    /// Whether the event means the user's grants for the app are revoked.
    public var endsGrants: Bool { self == .consentRevoked || self == .accountDeleted }

    static func isWellFormed(_ value: String) -> Bool {
        guard let first = value.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), value.utf8.count <= 64 else {
            return false
        }
        return value.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-")
        }
    }

    public var description: String { rawValue }
}
