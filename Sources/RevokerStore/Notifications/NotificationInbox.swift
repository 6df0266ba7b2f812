import Foundation
import Logging
import PostgresNIO

/// Apple's server-to-server notifications in PostgreSQL: stored append-only, de-duplicated by
/// `jti`, with their effects, audit events and (through the outbox triggers) events for the app
/// backend, all in one statement.
public struct NotificationInbox: Sendable {
    /// The audit actor of everything a notification does.
    public static let actor = "apple:notification"

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores `notification` unless its `jti` is known. A `consent-revoked` or `account-delete`
    /// ends the user's live requests for the app (`succeeded`/`revoked_by_user`, credential
    /// erased, any lease holder fenced out) without a call to Apple.
    ///
    /// Returns once committed: only then may the sender be told 200.
    public func receive(_ notification: ReceivedNotification) async throws -> NotificationReceipt {
        let n = notification
        return try await ProviderMessages.receive(
            """
            INSERT INTO revoker.apple_notifications
                (jti, client_id, type, type_as_sent, apple_user_id, event_time, issued_at, expires_at, issuer, key_id,
                 had_email, is_private_email)
            VALUES (\(n.id), \(n.clientID), \(n.type), \(n.typeAsSent), \(n.userID), \(n.eventTime), \(n.issuedAt),
                    \(n.expiresAt), \(n.issuer), \(n.keyID), \(n.hadEmail), \(n.isPrivateEmail))
            ON CONFLICT (jti) DO NOTHING
            RETURNING client_id, type, apple_user_id AS user_id
            """,
            provider: "apple",
            endingTypes: ["consent-revoked", "account-delete"],
            kind: .appleNotification,
            note: "\(notification.type) from Apple (jti \(notification.id.prefix(200)))",
            actor: Self.actor,
            client: client,
            logger: logger
        )
    }

    /// How many notifications are stored (for status and tests).
    public func count() async throws -> Int {
        try await StoreDatabase.run(logger) {
            let rows = try await client.query("SELECT count(*)::int FROM revoker.apple_notifications", logger: logger).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }
}
