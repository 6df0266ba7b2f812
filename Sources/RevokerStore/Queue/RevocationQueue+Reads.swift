import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Counts by state and outcome, the oldest due request's age, paused apps, unsealed intake
    /// rows, grants by provider and state and pending deletions; of `clientIDs` only when given
    /// (an API key's limit). The counts are the ones triggers keep (migration 0019), not a scan of
    /// the tables; when their deltas have piled up, this folds them.
    public func statistics(clientIDs: [String]? = nil, logger: Logger? = nil) async throws -> QueueStatistics {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            var byState: [RevocationState: Int] = [:]
            var byOutcome: [QueueStatistics.Outcome: Int] = [:]
            let deltas =
                try await self.client.query(
                    "SELECT (SELECT count(*) FROM revoker.request_counts) + (SELECT count(*) FROM revoker.grant_counts)",
                    logger: logger
                ).collect().first?.decode(Int.self) ?? 0
            if deltas > Self.countDeltasToFold {
                _ = try await self.client.query("SELECT revoker.compact_counts()", logger: logger).collect()
            }
            for row in try await self.client.query(
                """
                SELECT state, nullif(outcome, ''), sum(n)::int FROM revoker.request_counts
                WHERE \(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[])
                GROUP BY state, outcome HAVING sum(n) <> 0
                """,
                logger: logger
            ).collect() {
                let (rawState, rawOutcome, count) = try row.decode((String, String?, Int).self)
                guard let state = RevocationState(rawValue: rawState) else { continue }
                byState[state, default: 0] += count
                if let rawOutcome, let outcome = RevocationOutcome(rawValue: rawOutcome) {
                    byOutcome[QueueStatistics.Outcome(state: state, outcome: outcome), default: 0] += count
                }
            }
            let rows = try await self.client.query(
                """
                SELECT coalesce((extract(epoch FROM now() - min(run_after)) * 1000)::bigint, 0)
                         FROM revoker.revocation_requests WHERE state = 'pending' AND run_after <= now()
                          AND (\(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[]))
                """,
                logger: logger
            ).collect()
            let ageMilliseconds = try rows.first?.decode(Int64.self) ?? 0
            let counts = try await self.client.query(
                """
                SELECT (SELECT count(*)::int FROM revoker.app_pauses
                        WHERE \(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[])),
                       (SELECT count(*)::int FROM revoker.credential_intake),
                       (SELECT count(*)::int FROM revoker.audit_events
                        WHERE event = 'write_lost' AND occurred_at > now() - interval '1 day'
                          AND (\(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[])))
                """,
                logger: logger
            ).collect()
            let (paused, intake, lost) = try counts.first?.decode((Int, Int, Int).self) ?? (0, 0, 0)
            var statistics = QueueStatistics(
                byState: byState,
                byOutcome: byOutcome,
                oldestDueAge: .milliseconds(max(0, ageMilliseconds)),
                pausedApps: paused,
                unsealedIntake: intake
            )
            statistics.writesLost = lost
            for row in try await self.client.query(
                """
                SELECT provider, state, sum(n)::int FROM revoker.grant_counts
                WHERE \(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[])
                GROUP BY provider, state HAVING sum(n) <> 0
                """,
                logger: logger
            ).collect() {
                let (provider, rawState, count) = try row.decode((String, String, Int).self)
                guard let state = GrantState(rawValue: rawState) else { continue }
                statistics.grants[QueueStatistics.GrantCount(provider: provider, state: state)] = count
            }
            let deletions = try await self.client.query(
                """
                SELECT count(*)::int FROM revoker.account_deletions
                WHERE state = 'pending' AND (\(clientIDs)::text[] IS NULL OR client_ids && \(clientIDs)::text[] OR client_ids IS NULL)
                """,
                logger: logger
            ).collect()
            statistics.pendingDeletions = try deletions.first?.decode(Int.self) ?? 0
            return statistics
        }
    }

    /// How many count deltas (migration 0019) a read of the counts lets pile up before folding them.
    static let countDeltasToFold = 1_000

    /// What is left in the queue: requests not final yet, those of paused apps, paused apps.
    public func remainder(logger: Logger? = nil) async throws -> QueueRemainder {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT count(*)::int,
                       count(*) FILTER (WHERE r.state = 'pending' AND p.client_id IS NOT NULL)::int,
                       (SELECT count(*)::int FROM revoker.app_pauses)
                FROM revoker.revocation_requests r LEFT JOIN revoker.app_pauses p ON p.client_id = r.client_id
                WHERE r.state IN ('pending', 'running')
                """,
                logger: logger
            ).collect()
        }
        let (waiting, paused, apps) = try rows.first?.decode((Int, Int, Int).self) ?? (0, 0, 0)
        return QueueRemainder(waiting: waiting, waitingForPausedApps: paused, pausedApps: apps)
    }

    /// One request by id (without its credential), or nil.
    public func request(id: UUID, logger: Logger? = nil) async throws -> RevocationRequest? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await self.request(id: id, on: connection)
            }
        }
    }

    func request(id: UUID, on connection: PostgresConnection) async throws -> RevocationRequest? {
        let rows = try await connection.query(
            "SELECT \(unescaped: Self.requestColumns) FROM revoker.revocation_requests r WHERE r.id = \(id)",
            logger: self.logger
        ).collect()
        return try rows.first.map(Self.decodeRequest)
    }

    /// Requests matching `filter`, newest first.
    public func list(_ filter: RevocationFilter, logger: Logger? = nil) async throws -> [RevocationRequest] {
        let logger = logger ?? self.logger
        guard (1...1000).contains(filter.limit) else {
            throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000")
        }
        var sql = "SELECT \(Self.requestColumns) FROM revoker.revocation_requests r WHERE true"
        var binds = SQLBindings()
        if let value = filter.provider { sql += " AND r.provider = \(binds.bind(value))" }
        if let value = filter.clientID { sql += " AND r.client_id = \(binds.bind(value))" }
        if let value = filter.clientIDs { sql += " AND r.client_id = ANY(\(binds.bind(value))::text[])" }
        if let value = filter.externalReference { sql += " AND r.external_reference = \(binds.bind(value))" }
        if let value = filter.userID { sql += " AND r.apple_user_id = \(binds.bind(value))" }
        if let value = filter.state { sql += " AND r.state = \(binds.bind(value.rawValue))" }
        if let value = filter.createdBefore { sql += " AND r.created_at < \(binds.bind(value))" }
        sql += " ORDER BY r.created_at DESC, r.id DESC LIMIT \(binds.bind(filter.limit))"
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(binds.query(sql), logger: logger).collect()
        }
        return try rows.map(Self.decodeRequest)
    }

    /// Deletes final requests that finished before `finishedBefore` (retention). Audit rows
    /// are never deleted. Returns the number of requests deleted.
    ///
    /// A batch of `batchSize` per transaction, oldest first: a year of requests is never one
    /// transaction holding a million row locks and the WAL behind it while workers drain.
    @discardableResult
    public func prune(finishedBefore: Date, batchSize: Int = 5_000, logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        var pruned = 0
        while true {
            let rows = try await StoreDatabase.run(logger) {
                try await self.client.query(
                    """
                    WITH doomed AS (
                        SELECT id FROM revoker.revocation_requests
                        WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at < \(finishedBefore)
                        ORDER BY finished_at
                        LIMIT \(batchSize)
                    ), deleted AS (
                        DELETE FROM revoker.revocation_requests r USING doomed d WHERE r.id = d.id
                        RETURNING 1
                    ) SELECT count(*)::int FROM deleted
                    """,
                    logger: logger
                ).collect()
            }
            let deleted = try rows.first?.decode(Int.self) ?? 0
            pruned += deleted
            if deleted < batchSize { return pruned }
        }
    }
}
