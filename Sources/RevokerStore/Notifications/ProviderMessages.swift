import Foundation
import Logging
import PostgresNIO

/// What both inboxes do with a provider's message about a user, in one statement: store it
/// (append-only, unique by `jti`), audit it, and when its type ends the user's grants, end the
/// user's live requests of that provider for the app (`succeeded`/`revoked_by_user`, credential
/// erased, any lease holder fenced out). Outbox events come from the tables' triggers.
enum ProviderMessages {
    /// - Parameters:
    ///   - insert: `INSERT … ON CONFLICT (jti) DO NOTHING RETURNING client_id, type, <the user's id> AS user_id`.
    ///   - provider: whose requests the message can end.
    ///   - endingTypes: the types that end the user's grants.
    ///   - kind: the audit event that records the message.
    ///   - note: what the audit rows say of it (never a token).
    static func receive(
        _ insert: PostgresQuery,
        provider: String,
        endingTypes: [String],
        kind: AuditEventKind,
        note: String,
        actor: String,
        client: PostgresClient,
        logger: Logger
    ) async throws -> NotificationReceipt {
        let noticeEvents = try AuditWriter.json([AuditEvent(kind, detail: note)])
        let endedEvents = try AuditWriter.json([
            AuditEvent(kind, detail: note + ": the user's grant is gone"),
            AuditEvent(.succeeded, detail: "outcome=\(RevocationOutcome.revokedByUser.rawValue)"),
            AuditEvent(.credentialErased),
        ])
        var binds = insert.binds
        let first = binds.count + 1
        try binds.append(provider)
        try binds.append(endingTypes)
        try binds.append(actor)
        try binds.append(endedEvents)
        try binds.append(noticeEvents)
        let (providerBind, typesBind, actorBind, endedBind, noticeBind) = (first, first + 1, first + 2, first + 3, first + 4)
        let sql = """
            WITH inserted AS (
                \(insert.sql)
            ), targets AS (
                SELECT r.id FROM revoker.revocation_requests r JOIN inserted i
                  ON r.provider = $\(providerBind) AND r.client_id = i.client_id AND r.apple_user_id = i.user_id
                WHERE i.type = ANY($\(typesBind)::text[]) AND r.state IN ('pending', 'running')
                ORDER BY r.id FOR UPDATE OF r
            ), ended AS (
                UPDATE revoker.revocation_requests r
                SET state = 'succeeded', outcome = 'revoked_by_user', finished_at = now(), updated_at = now(),
                    lease_owner = NULL, lease_expires_at = NULL, fencing_token = r.fencing_token + 1,
                    sealed_credential = NULL, credential_key_id = NULL
                FROM targets t
                WHERE r.id = t.id AND r.state IN ('pending', 'running')
                RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts,
                          $\(actorBind)::text AS actor, $\(endedBind)::jsonb AS events
            ), erased AS (
                DELETE FROM revoker.credential_intake c USING ended WHERE c.request_id = ended.id
            ), audited AS (
                SELECT NULL::uuid AS id, i.client_id, NULL::text AS external_reference, i.user_id AS apple_user_id, NULL::int AS attempts,
                       $\(actorBind)::text AS actor, $\(noticeBind)::jsonb AS events
                FROM inserted i
                UNION ALL
                SELECT * FROM ended
            ), audit AS (
                \(AuditWriter.insert(from: "audited"))
            )
            SELECT (SELECT count(*) FROM inserted)::int, (SELECT count(*) FROM ended)::int
            """
        let rows = try await StoreDatabase.run(logger) {
            try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).collect()
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "storing a provider's message returned no row") }
        let (inserted, ended) = try row.decode((Int, Int).self)
        return inserted == 0 ? .duplicate : .accepted(endedRequests: ended)
    }
}
