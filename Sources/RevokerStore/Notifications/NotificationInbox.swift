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
        let note = "\(notification.type) from Apple (jti \(notification.id.prefix(200)))"
        let noticeEvents = try AuditWriter.json([AuditEvent(.appleNotification, detail: note)])
        let endedEvents = try AuditWriter.json([
            AuditEvent(.appleNotification, detail: note + ": the user's grant is gone"),
            AuditEvent(.succeeded, detail: "outcome=\(RevocationOutcome.revokedByUser.rawValue)"),
            AuditEvent(.credentialErased),
        ])
        let n = notification
        let rows = try await StoreDatabase.run(logger) {
            try await client.query(
                """
                WITH inserted AS (
                    INSERT INTO revoker.apple_notifications
                        (jti, client_id, type, type_as_sent, apple_user_id, event_time, issued_at, expires_at, issuer, key_id,
                         had_email, is_private_email)
                    VALUES (\(n.id), \(n.clientID), \(n.type), \(n.typeAsSent), \(n.appleUserID), \(n.eventTime), \(n.issuedAt),
                            \(n.expiresAt), \(n.issuer), \(n.keyID), \(n.hadEmail), \(n.isPrivateEmail))
                    ON CONFLICT (jti) DO NOTHING
                    RETURNING client_id, type, apple_user_id
                ), targets AS (
                    SELECT r.id FROM revoker.revocation_requests r JOIN inserted i
                      ON r.client_id = i.client_id AND r.apple_user_id = i.apple_user_id
                    WHERE i.type IN ('consent-revoked', 'account-delete') AND r.state IN ('pending', 'running')
                    ORDER BY r.id FOR UPDATE OF r
                ), ended AS (
                    UPDATE revoker.revocation_requests r
                    SET state = 'succeeded', outcome = 'revoked_by_user', finished_at = now(), updated_at = now(),
                        lease_owner = NULL, lease_expires_at = NULL, fencing_token = r.fencing_token + 1,
                        sealed_credential = NULL, credential_key_id = NULL
                    FROM targets t
                    WHERE r.id = t.id AND r.state IN ('pending', 'running')
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts,
                              \(Self.actor)::text AS actor, \(endedEvents)::jsonb AS events
                ), erased AS (
                    DELETE FROM revoker.credential_intake c USING ended WHERE c.request_id = ended.id
                ), audited AS (
                    SELECT NULL::uuid AS id, i.client_id, NULL::text AS external_reference, i.apple_user_id, NULL::int AS attempts,
                           \(Self.actor)::text AS actor, \(noticeEvents)::jsonb AS events
                    FROM inserted i
                    UNION ALL
                    SELECT * FROM ended
                ), audit AS (
                    \(unescaped: AuditWriter.insert(from: "audited"))
                )
                SELECT (SELECT count(*) FROM inserted)::int, (SELECT count(*) FROM ended)::int
                """,
                logger: logger
            ).collect()
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "storing a notification returned no row") }
        let (inserted, ended) = try row.decode((Int, Int).self)
        return inserted == 0 ? .duplicate : .accepted(endedRequests: ended)
    }

    /// How many notifications are stored (for status and tests).
    public func count() async throws -> Int {
        try await StoreDatabase.run(logger) {
            let rows = try await client.query("SELECT count(*)::int FROM revoker.apple_notifications", logger: logger).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }
}
