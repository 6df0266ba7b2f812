import Foundation
import Logging
import PostgresNIO

/// A verified security event from Google's Cross-Account Protection, as the store keeps it.
public struct ReceivedSecurityEvent: Sendable, Equatable {
    /// Google's `jti`: unique; a replay changes nothing.
    public var id: String
    /// The configured app the event's audience belongs to.
    public var clientID: String
    public var audience: String
    /// The type's last URI segment (`tokens-revoked`, `account-purged`, …).
    public var type: String
    public var typeURI: String
    public var googleUserID: String?
    public var reason: String?
    public var issuedAt: Date
    public var issuer: String
    public var keyID: String

    public init(
        id: String,
        clientID: String,
        audience: String,
        type: String,
        typeURI: String,
        googleUserID: String?,
        reason: String?,
        issuedAt: Date,
        issuer: String,
        keyID: String
    ) {
        self.id = id
        self.clientID = clientID
        self.audience = audience
        self.type = type
        self.typeURI = typeURI
        self.googleUserID = googleUserID
        self.reason = reason
        self.issuedAt = issuedAt
        self.issuer = issuer
        self.keyID = keyID
    }
}

/// Google's security events in PostgreSQL: stored append-only, de-duplicated by `jti`, with
/// their effects, audit events and (through the outbox trigger) events for the app backend, in
/// one statement.
public struct SecurityEventInbox: Sendable {
    /// The audit actor of everything a security event does.
    public static let actor = "google:risc"

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores `event` unless its `jti` is known. A `tokens-revoked` or `account-purged` ends the
    /// user's live Google requests for the app (`succeeded`/`revoked_by_user`, credential erased,
    /// any lease holder fenced out) without a call to Google.
    ///
    /// Returns once committed: only then may Google be told 202.
    public func receive(_ event: ReceivedSecurityEvent) async throws -> NotificationReceipt {
        let e = event
        return try await ProviderMessages.receive(
            """
            INSERT INTO revoker.google_security_events
                (jti, client_id, audience, type, type_uri, google_user_id, reason, issued_at, issuer, key_id)
            VALUES (\(e.id), \(e.clientID), \(e.audience), \(e.type), \(e.typeURI), \(e.googleUserID), \(e.reason),
                    \(e.issuedAt), \(e.issuer), \(e.keyID))
            ON CONFLICT (jti) DO NOTHING
            RETURNING client_id, type, google_user_id AS user_id
            """,
            provider: "google",
            endingTypes: ["tokens-revoked", "account-purged"],
            kind: .googleSecurityEvent,
            note: "\(event.type) from Google (jti \(event.id.prefix(200)))",
            actor: Self.actor,
            client: client,
            logger: logger
        )
    }

    /// How many security events are stored (for status and tests).
    public func count() async throws -> Int {
        try await StoreDatabase.run(logger) {
            let rows = try await client.query("SELECT count(*)::int FROM revoker.google_security_events", logger: logger).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }
}
