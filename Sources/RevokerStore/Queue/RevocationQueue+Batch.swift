import Foundation
import Logging
import PostgresNIO

/// `finish` and `replaceCredential` as single statements that serve many requests at once.
///
/// Each is one `UPDATE … FROM jsonb_to_recordset(…)` whose WHERE clause is the fence (still
/// running under the lease's fencing token; PostgreSQL re-checks it on the locked row), with
/// the intake row deleted and the audit events inserted by data-modifying CTEs of the same
/// statement: atomic without BEGIN/COMMIT, one round trip and one commit for the whole batch.
extension RevocationQueue {
    /// One audit event as the batched statements read it.
    /// A fenced finish waiting for its statement.
    struct FinishRow: Encodable, Sendable {
        enum CodingKeys: String, CodingKey {
            case id
            case fencingToken = "fencing_token"
            case owner, state, outcome, keep
            case errorCode = "error_code"
            case errorDescription = "error_description"
            case events
        }
        var id: UUID
        var fencingToken: Int64
        var owner: String
        var state: String
        var outcome: String
        var keep: Bool
        var errorCode: String?
        var errorDescription: String?
        var events: [AuditWriter.Row]
    }

    /// A fenced credential replacement waiting for its statement.
    struct ReplaceRow: Encodable, Sendable {
        enum CodingKeys: String, CodingKey {
            case id
            case fencingToken = "fencing_token"
            case owner, kind, sealed
            case keyID = "key_id"
            case events
        }
        var id: UUID
        var fencingToken: Int64
        var owner: String
        var kind: String
        /// Base64 of the sealed bytes (sealed: no secret in the clear).
        var sealed: String
        var keyID: String
        var events: [AuditWriter.Row]
    }

    /// Finishes every row whose lease is current, in one statement; answers per row whether it applied.
    func finishAll(_ rows: [FinishRow]) async throws -> [Bool] {
        let applied = try await applyFenced(
            rows,
            columns: "state text, outcome text, keep bool, error_code text, error_description text",
            set: """
                state = i.state, outcome = i.outcome, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
                last_error_code = i.error_code, last_error_description = i.error_description,
                sealed_credential = CASE WHEN i.keep THEN r.sealed_credential END,
                credential_key_id = CASE WHEN i.keep THEN r.credential_key_id END
                """
        )
        return rows.map { applied.contains($0.id) }
    }

    /// Replaces the credential of every row whose lease is current, in one statement.
    func replaceAll(_ rows: [ReplaceRow]) async throws -> [Bool] {
        let applied = try await applyFenced(
            rows,
            columns: "kind text, sealed text, key_id text",
            set: "credential_kind = i.kind, sealed_credential = decode(i.sealed, 'base64'), credential_key_id = i.key_id"
        )
        return rows.map { applied.contains($0.id) }
    }

    /// Locks the current rows of `input` in id order. Every statement that updates many requests
    /// at once takes its locks this way, so two of them over overlapping rows (a worker extending
    /// its leases while some of its requests finish) wait for each other instead of deadlocking.
    static let lockInIDOrder = """
        SELECT r.id FROM revoker.revocation_requests r JOIN input i ON r.id = i.id
        WHERE r.state = 'running' AND r.fencing_token = i.fencing_token
        ORDER BY r.id FOR UPDATE OF r
        """

    /// One statement for many fenced changes: `set` (over `r`, the request, and `i`, its input row
    /// with `columns` besides id, fencing_token, owner and events) applies to every row still running
    /// under its fencing token; those rows lose their intake credential and get their events, in order.
    /// Returns the ids it applied to.
    private func applyFenced(_ rows: some Encodable & Sendable, columns: String, set: String) async throws -> Set<UUID> {
        let input = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        return try await StoreDatabase.run(logger) {
            let query: PostgresQuery = """
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(input)::jsonb)
                        AS t(id uuid, fencing_token int8, owner text, events jsonb, \(unescaped: columns))
                ), locked AS (
                    \(unescaped: Self.lockInIDOrder)
                ), changed AS (
                    UPDATE revoker.revocation_requests r
                    SET \(unescaped: set), updated_at = now()
                    FROM input i
                    WHERE r.id = i.id AND r.id IN (SELECT id FROM locked) AND r.state = 'running' AND r.fencing_token = i.fencing_token
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts, i.owner AS actor, i.events
                ), erased AS (
                    DELETE FROM revoker.credential_intake c USING changed WHERE c.request_id = changed.id
                ), audit AS (
                    \(unescaped: AuditWriter.insert(from: "changed"))
                )
                SELECT id FROM changed
                """
            var ids: Set<UUID> = []
            for try await id in try await self.client.query(query, logger: self.logger).decode(UUID.self) {
                ids.insert(id)
            }
            return ids
        }
    }
}
