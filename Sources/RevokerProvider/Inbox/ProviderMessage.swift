import Foundation

/// A verified message a provider pushed about one of an app's users, as the store keeps it:
/// what every provider's message has, and the provider's own columns beside it.
public struct ProviderMessage: Sendable, Equatable {
    /// The token's `jti`: unique per provider; a replay changes nothing.
    public var id: String
    /// The configured app it is for.
    public var clientID: String
    /// The event's type as the provider's table keeps it (`consent-revoked`, `tokens-revoked`, …).
    public var type: String
    /// The user it is about, when it names one.
    public var userID: String?
    /// Whether it means the user's grants for the app are gone: the store then ends the user's
    /// live requests of that provider for the app, without a call to the provider.
    public var endsGrants: Bool
    /// `iat`.
    public var issuedAt: Date
    /// `iss`.
    public var issuer: String
    /// The key that signed it.
    public var keyID: String
    /// The provider's own columns and their values (a column's name comes from code, never
    /// from the message).
    public var columns: [Column]

    /// One of the provider's own columns.
    public struct Column: Sendable, Equatable {
        public var name: String
        public var value: Value

        public init(_ name: String, _ value: Value) {
            self.name = name
            self.value = value
        }
    }

    /// A column's value.
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
        issuedAt: Date,
        issuer: String,
        keyID: String,
        columns: [Column] = []
    ) {
        self.id = id
        self.clientID = clientID
        self.type = type
        self.userID = userID
        self.endsGrants = endsGrants
        self.issuedAt = issuedAt
        self.issuer = issuer
        self.keyID = keyID
        self.columns = columns
    }
}

/// The append-only table a provider's messages are kept in (created by a migration, with the
/// outbox trigger that publishes them), and how its rows and audit events are named.
///
/// Every table has `jti` (unique), `client_id`, `type`, `issued_at`, `issuer` and `key_id`; the
/// user's column and the provider's own columns are named here.
public struct ProviderMessageTable: Sendable, Hashable {
    /// The provider whose requests a message can end.
    public var provider: ProviderName
    /// The table in the `revoker` schema.
    public var name: String
    /// The column holding the user's id.
    public var userColumn: String
    /// The audit event that records a message (one the database's check accepts).
    public var auditEvent: String
    /// The audit actor of everything a message does.
    public var actor: String
    /// How audit rows speak of the sender, as in "consent-revoked from Apple".
    public var sender: String

    public init(provider: ProviderName, name: String, userColumn: String, auditEvent: String, actor: String, sender: String) {
        self.provider = provider
        self.name = name
        self.userColumn = userColumn
        self.auditEvent = auditEvent
        self.actor = actor
        self.sender = sender
    }
}
