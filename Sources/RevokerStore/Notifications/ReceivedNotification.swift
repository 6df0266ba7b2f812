import Foundation

/// A verified notification from Apple, as the store keeps it. The email address Apple may
/// include is not kept (the table is append-only and cannot forget it), only whether one came.
public struct ReceivedNotification: Sendable, Equatable {
    /// Apple's `jti`: unique; a replay changes nothing.
    public var id: String
    public var clientID: String
    /// The type with Apple's spellings folded (`consent-revoked`, `account-delete`, …).
    public var type: String
    /// The type as Apple spelled it.
    public var typeAsSent: String
    public var userID: String
    public var eventTime: Date
    public var issuedAt: Date
    public var expiresAt: Date?
    public var issuer: String
    public var keyID: String
    public var hadEmail: Bool
    public var isPrivateEmail: Bool?

    public init(
        id: String,
        clientID: String,
        type: String,
        typeAsSent: String,
        userID: String,
        eventTime: Date,
        issuedAt: Date,
        expiresAt: Date?,
        issuer: String,
        keyID: String,
        hadEmail: Bool,
        isPrivateEmail: Bool?
    ) {
        self.id = id
        self.clientID = clientID
        self.type = type
        self.typeAsSent = typeAsSent
        self.userID = userID
        self.eventTime = eventTime
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.issuer = issuer
        self.keyID = keyID
        self.hadEmail = hadEmail
        self.isPrivateEmail = isPrivateEmail
    }
}

/// What storing a notification did.
public enum NotificationReceipt: Sendable, Equatable {
    /// Stored now; `endedRequests` live requests for the user ended `revoked_by_user`.
    case accepted(endedRequests: Int)
    /// Stored before (same `jti`): nothing changed.
    case duplicate
}

/// Whether Apple told Revoker that a claimed request's user revoked the app's grants.
public enum UserRevocation: String, Sendable, Equatable {
    /// `consent-revoked`: grants issued before it are dead; the user may have signed in again since.
    case consentRevoked = "consent-revoked"
    /// `account-delete`: the Apple account is gone, and every grant with it.
    case accountDeleted = "account-delete"
}
