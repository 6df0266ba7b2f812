import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Returns running requests whose lease expired to `pending` (run now), audited `rescued`.
    /// The attempt stays counted, so a request that keeps crashing workers exhausts.
    @discardableResult
    public func rescueExpiredLeases() async throws -> Int {
        let events = try AuditWriter.json([AuditEvent(.rescued, detail: "lease expired")])
        let rows = try await StoreDatabase.run(self.logger) {
            try await self.client.query(
                """
                WITH expired AS (
                    SELECT id FROM revoker.revocation_requests
                    WHERE state = 'running' AND lease_expires_at < now()
                    FOR UPDATE SKIP LOCKED
                ), rescued AS (
                    UPDATE revoker.revocation_requests r
                    SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = now(), updated_at = now()
                    FROM expired WHERE r.id = expired.id
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts,
                              'worker'::text AS actor, \(events)::jsonb AS events
                ), audit AS (
                    \(unescaped: AuditWriter.insert(from: "rescued"))
                )
                SELECT count(*)::int FROM rescued
                """,
                logger: self.logger
            ).collect()
        }
        let count = try rows.first?.decode(Int.self) ?? 0
        if count > 0 {
            self.logger.notice("Rescued requests with expired leases", metadata: ["revoker.count": "\(count)"])
        }
        return count
    }
}
