import Foundation
import Logging
import PostgresNIO

/// The one fenced-write mechanism: every change to a running request is a ``FencedChange``
/// applied by one `UPDATE … FROM jsonb_to_recordset(…)` whose WHERE clause is the fence (still
/// running under the lease's fencing token; PostgreSQL re-checks it on the locked row), with
/// the intake row deleted (when the change says so) and the audit events inserted by
/// data-modifying CTEs of the same statement: atomic without BEGIN/COMMIT, one round trip and
/// one commit for any number of requests.
extension RevocationQueue {
    /// Locks the current rows of `input` in id order. Every statement that updates many requests
    /// at once takes its locks this way, so two of them over overlapping rows (a worker extending
    /// its leases while some of its requests finish) wait for each other instead of deadlocking.
    static let lockInIDOrder = """
        SELECT r.id, r.attempts FROM revoker.revocation_requests r JOIN input i ON r.id = i.id
        WHERE r.state = 'running' AND r.fencing_token = i.fencing_token
        ORDER BY r.id FOR UPDATE OF r
        """

    /// Applies each row's change where its lease is still current; returns the ids it applied to.
    /// Events carry the attempt they belong to: the request's attempt count before the change.
    func applyFenced<Change: FencedChange>(_ rows: [FencedRow<Change>]) async throws -> Set<UUID> {
        guard !rows.isEmpty else { return [] }
        let input = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        let columns = Change.columns.isEmpty ? "" : ", " + Change.columns
        let assignments = Change.assignments.isEmpty ? "" : Change.assignments + ", "
        let erase =
            Change.erasesIntake
            ? ", erased AS (DELETE FROM revoker.credential_intake c USING changed WHERE c.request_id = changed.id)" : ""
        return try await StoreDatabase.run(logger) {
            let query: PostgresQuery = """
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(input)::jsonb)
                        AS t(id uuid, fencing_token int8, owner text, events jsonb\(unescaped: columns))
                ), locked AS (
                    \(unescaped: Self.lockInIDOrder)
                ), changed AS (
                    UPDATE revoker.revocation_requests r
                    SET \(unescaped: assignments)updated_at = now()
                    FROM input i JOIN locked l ON l.id = i.id
                    WHERE r.id = i.id AND r.state = 'running' AND r.fencing_token = i.fencing_token
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.grant_id, l.attempts, i.owner AS actor, i.events
                )\(unescaped: erase)\(unescaped: Change.alsoChanges), audit AS (
                    \(unescaped: AuditWriter.insert(from: "changed"))
                )
                SELECT id, client_id FROM changed
                """
            var ids: Set<UUID> = []
            for try await (id, clientID) in try await self.client.query(query, logger: self.logger).decode((UUID, String).self) {
                ids.insert(id)
                if Change.ends { acknowledged.record(.init(.end, id: id, clientID: clientID)) }
            }
            return ids
        }
    }

    /// Applies one request's change; false when its lease is stale.
    func applyFenced<Change: FencedChange>(_ row: FencedRow<Change>) async throws -> Bool {
        try await applyFenced([row]).contains(row.id)
    }

    /// Applies a batch of the same kind of change, answering per row (for ``GroupCommit``).
    func applyFencedBatch<Change: FencedChange>(_ rows: [FencedRow<Change>]) async throws -> [Bool] {
        let applied = try await applyFenced(rows)
        return rows.map { applied.contains($0.id) }
    }

    /// Logs (debug) a fenced operation's result: `message` when it applied, the refusal when the lease was stale.
    func logFenced(_ lease: Lease, applied: Bool, _ message: Logger.Message? = nil, metadata: Logger.Metadata = [:]) {
        guard logger.logLevel <= .debug else { return }
        var metadata = metadata
        metadata["revoker.request.id"] = "\(lease.requestID)"
        if applied {
            if let message { logger.debug(message, metadata: metadata) }
        } else {
            metadata["revoker.fencing_token"] = "\(lease.fencingToken)"
            logger.debug("Fenced operation refused: the lease is stale", metadata: metadata)
        }
    }
}
