import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// What a rescue pass did.
public struct RescueResult: Sendable, Equatable {
    /// Requests put back in the queue.
    public var rescued: Int
    /// Running requests of workers whose liveness lock was found free, rescued once it has
    /// stayed free for ``RevocationQueue/livenessConfirmation`` (a drain waits for them).
    public var awaitingConfirmation: Int

    public init(rescued: Int, awaitingConfirmation: Int) {
        self.rescued = rescued
        self.awaitingConfirmation = awaitingConfirmation
    }
}

extension RevocationQueue {
    /// Returns the running requests of workers that are gone to `pending` (due at once, in their
    /// place in line), audited `rescued`: those whose lease expired, and those of registered
    /// workers whose liveness lock has been free for `confirmation`
    /// (`RevocationQueue+Liveness.swift`). The attempt stays counted, so a request that keeps
    /// crashing workers exhausts.
    public func rescue(confirmation: Duration = RevocationQueue.livenessConfirmation, logger: Logger? = nil) async throws -> RescueResult {
        let logger = logger ?? self.logger
        let expired = try AuditWriter.json([AuditEvent(.rescued, detail: "lease expired")])
        let gone = try AuditWriter.json([AuditEvent(.rescued, detail: "its worker is gone (liveness lock free)")])
        let confirmationMilliseconds = confirmation.milliseconds
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                // Owners whose lock nobody holds become suspects; the try-locks last until commit.
                try await connection.run(
                    """
                    UPDATE revoker.workers SET lock_lost_at = now()
                    WHERE lock_lost_at IS NULL AND pg_try_advisory_xact_lock(\(Self.workerLockNamespace), revoker.worker_lock(owner))
                    """,
                    logger: logger
                )
                return try await connection.query(
                    """
                    WITH dead AS (
                        SELECT owner FROM revoker.workers
                        WHERE lock_lost_at <= now() - make_interval(secs => \(confirmationMilliseconds)::float8 / 1000.0)
                          AND pg_try_advisory_xact_lock(\(Self.workerLockNamespace), revoker.worker_lock(owner))
                    ), stale AS (
                        SELECT r.id, r.lease_expires_at < now() AS expired FROM revoker.revocation_requests r
                        WHERE r.state = 'running' AND (r.lease_expires_at < now() OR r.lease_owner IN (SELECT owner FROM dead))
                        FOR UPDATE SKIP LOCKED
                    ), rescued AS (
                        -- run_after stays as it was when the request was claimed (due then), so a rescued
                        -- request keeps its place in line instead of waiting behind the whole backlog.
                        UPDATE revoker.revocation_requests r
                        SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
                        FROM stale WHERE r.id = stale.id
                        RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts, 'worker'::text AS actor,
                                  CASE WHEN stale.expired THEN \(expired)::jsonb ELSE \(gone)::jsonb END AS events
                    ), audit AS (
                        \(unescaped: AuditWriter.insert(from: "rescued"))
                    ), forgotten AS (
                        -- A dead owner is forgotten once none of its requests is left running.
                        DELETE FROM revoker.workers w USING dead
                        WHERE w.owner = dead.owner AND NOT EXISTS (
                            SELECT 1 FROM revoker.revocation_requests r
                            WHERE r.state = 'running' AND r.lease_owner = w.owner AND r.id NOT IN (SELECT id FROM stale)
                        )
                    ), woken AS (
                        -- Idle workers claim what came back at once, not at their next poll.
                        SELECT pg_notify('revoker_requests', '') FROM (SELECT 1 FROM rescued LIMIT 1) any_rescued
                    )
                    SELECT (SELECT count(*) FROM rescued)::int AS rescued,
                           (SELECT count(*) FROM revoker.revocation_requests r JOIN revoker.workers w ON w.owner = r.lease_owner
                            WHERE r.state = 'running' AND w.lock_lost_at IS NOT NULL
                              AND w.owner NOT IN (SELECT owner FROM dead))::int AS awaiting,
                           (SELECT count(*) FROM woken)::int AS woken
                    """,
                    logger: logger
                ).collect()
            }
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "the rescue returned no row") }
        let (rescued, awaiting, _) = try row.decode((Int, Int, Int).self)
        if rescued > 0 {
            logger.notice("Rescued requests of workers that are gone", metadata: ["revoker.count": "\(rescued)"])
        }
        return RescueResult(rescued: rescued, awaitingConfirmation: awaiting)
    }

    /// Hands back to `pending` the running requests leased to `owner` that are not in
    /// `keeping`, giving their attempt back, audited `released`: a worker whose claim or write
    /// was cut off by the database (a failover) cannot know whether it committed, and what it
    /// does not carry on would otherwise wait for its lease to expire, renewed by nobody yet
    /// rescued by nobody while the owner lives. Returns how many it handed back.
    ///
    /// Only the caller knows what it carries: it must not claim while this runs.
    public func handBackUntracked(owner: String, keeping: [UUID], logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        try Self.validateActor(owner)
        let events = try AuditWriter.json([AuditEvent(.released, detail: "its worker lost track of it (a claim or a write cut off by the database)")])
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                WITH untracked AS (
                    SELECT r.id FROM revoker.revocation_requests r
                    WHERE r.state = 'running' AND r.lease_owner = \(owner) AND r.id <> ALL(\(keeping)::uuid[])
                    FOR UPDATE SKIP LOCKED
                ), handed AS (
                    UPDATE revoker.revocation_requests r
                    SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
                        attempts = greatest(r.attempts - 1, 0), updated_at = now()
                    FROM untracked WHERE r.id = untracked.id
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts, \(owner)::text AS actor, \(events)::jsonb AS events
                ), audit AS (
                    \(unescaped: AuditWriter.insert(from: "handed"))
                ), woken AS (
                    SELECT pg_notify('revoker_requests', '') FROM (SELECT 1 FROM handed LIMIT 1) any_handed
                )
                SELECT (SELECT count(*) FROM handed)::int, (SELECT count(*) FROM woken)::int
                """,
                logger: logger
            ).collect()
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "the hand-back returned no row") }
        let (handed, _) = try row.decode((Int, Int).self)
        if handed > 0 {
            logger.notice("Handed back requests this worker had lost track of", metadata: ["revoker.count": "\(handed)"])
        }
        return handed
    }
}
