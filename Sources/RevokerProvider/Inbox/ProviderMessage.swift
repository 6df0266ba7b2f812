import Foundation

/// A verified message a provider pushed about one of an app's users, as the store keeps it:
/// what every provider's message has, and the provider's own fields beside it (kept as one
/// JSON object that only the provider's plug-in reads).
public struct ProviderMessage: Sendable, Equatable {
    /// The token's `jti`: unique per provider; a replay changes nothing.
    public var id: String
    /// The configured app it is for.
    public var clientID: String
    /// The event's type as the provider names it (`consent-revoked`, `tokens-revoked`, …).
    public var type: String
    /// The user it is about, when it names one.
    public var userID: String?
    /// Whether it means the user's grants for the app are gone: the store then ends the user's
    /// live requests of that provider for the app, without a call to the provider.
    public var endsGrants: Bool
    /// Whether the user's account at the provider is gone too (every grant with it).
    public var endsAccount: Bool
    /// The event the app backend is told of (`<provider>.<what>`, e.g. `apple.consent_revoked`),
    /// or nil when it is told nothing.
    public var eventType: String?
    /// When the user acted, by the provider's clock, when it says (else `issuedAt` stands in).
    public var eventTime: Date?
    /// `iat`.
    public var issuedAt: Date
    /// `iss`.
    public var issuer: String
    /// The key that signed it.
    public var keyID: String
    /// The provider's own fields and their values (a field's name comes from code, never
    /// from the message).
    public var details: [Detail]
    /// Whether the person asks the app to delete their data: the store opens an erasure request
    /// with a public code whose status page the person can read, and the backend decides it.
    public var opensErasure: Bool

    /// One of the provider's own fields.
    public struct Detail: Sendable, Equatable {
        public var name: String
        public var value: Value

        public init(_ name: String, _ value: Value) {
            self.name = name
            self.value = value
        }
    }

    /// A field's value.
    public enum Value: Sendable, Equatable {
        case text(String?)
        case time(Date?)
        case flag(Bool?)
    }

    public init(
        id: String,
        clientID: String,
        type: String,
        userID: String?,
        endsGrants: Bool,
        endsAccount: Bool = false,
        eventType: String?,
        eventTime: Date? = nil,
        issuedAt: Date,
        issuer: String,
        keyID: String,
        details: [Detail] = [],
        opensErasure: Bool = false
    ) {
        self.id = id
        self.clientID = clientID
        self.type = type
        self.userID = userID
        self.endsGrants = endsGrants
        self.endsAccount = endsAccount
        self.eventType = eventType
        self.eventTime = eventTime
        self.issuedAt = issuedAt
        self.issuer = issuer
        self.keyID = keyID
        self.details = details
        self.opensErasure = opensErasure
    }
}

/// Where a provider's messages come from, as the store records them: whose requests and grants
/// a message can end, and how the audit trail names it.
public struct ProviderMessageSource: Sendable, Hashable {
    /// The provider whose requests and grants a message can end.
    public var provider: ProviderName
    /// The audit event that records a message: `provider_message`, or the name a provider had
    /// before there was one for all (`apple_notification`, `google_security_event`).
    public var auditEvent: String
    /// The audit actor of everything a message does.
    public var actor: String
    /// How audit rows speak of the sender, as in "consent-revoked from Apple".
    public var sender: String

    /// The audit event of any provider's messages.
    public static let neutralAuditEvent = "provider_message"

    public init(provider: ProviderName, auditEvent: String = Self.neutralAuditEvent, actor: String, sender: String) {
        self.provider = provider
        self.auditEvent = auditEvent
        self.actor = actor
        self.sender = sender
    }
}
