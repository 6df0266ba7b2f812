import Foundation
import Logging
import PostgresNIO

/// Whether a worker's owner id is known alive (migration 0011): a worker holds a session-level
/// advisory lock named after its owner on a connection of its own for as long as it lives, and
/// registers the owner in `revoker.workers`. A rescuer that can take a registered owner's lock
/// knows its session is gone, and rescues that owner's requests without waiting for their leases.
extension RevocationQueue {
    /// The first key of every worker's liveness lock (the second is `revoker.worker_lock(owner)`).
    static let workerLockNamespace: Int32 = 1_920_364_290

    /// How long an owner's lock must stay free before its requests are rescued: a worker whose
    /// connection dropped for a moment (a database restart) takes its lock back sooner.
    public static let livenessConfirmation: Duration = .seconds(3)

    /// Holds `owner`'s liveness lock and registration for the duration of `body`, on a
    /// connection of its own that also listens for wake-ups. `registered` is called once the
    /// lock is held and the owner registered. When the connection drops, the lock goes with it
    /// and this throws; the connection is closed on the way out, so the lock never stays
    /// behind in the pool.
    ///
    /// Throws ``RevokerStoreError/Code-swift.struct/livenessUnavailable`` when the database
    /// refuses the lock or the registration for good (a role without the 0011 grants); any
    /// other failure (a read-only server, a server going away) is thrown as it is, to be tried again.
    ///
    /// `opened` receives a way to end the session from outside: a worker that finds its lock gone
    /// where it claims ends a session the server no longer has, instead of waiting for its heartbeat.
    public func withWorkerSession<Result: Sendable>(
        owner: String,
        opened: @Sendable (WorkerSession) -> Void = { _ in },
        registered: @Sendable () -> Void,
        _ body: @Sendable (WakeUps) async throws -> Result
    ) async throws -> Result {
        try Self.validateActor(owner)
        return try await self.client.withConnection { connection in
            let outcome: Swift.Result<Result, any Error>
            opened(WorkerSession(connection: connection))
            do {
                // Bounded: a connection that stopped answering must not hold the worker here,
                // where no heartbeat runs yet. Closing it below ends what was left waiting.
                try await withDeadline(Self.lockDeadline) { try await self.lock(owner: owner, on: connection) }
                registered()
                outcome = .success(try await self.listen(on: connection, body))
            } catch {
                outcome = .failure(StoreDatabase.map(error))
            }
            // Closed, never handed back: a pooled connection must not keep holding the lock.
            try? await connection.close().get()
            return try outcome.get()
        }
    }

    /// How long taking the lock and registering may take.
    static let lockDeadline: Duration = .seconds(10)

    /// Takes `owner`'s lock on `connection`, then registers the owner. Never waits for the lock:
    /// a rescuer holds it for a moment while it looks, and a session of this worker's that the
    /// server has not yet noticed gone may still hold it; the next try comes a second later.
    private func lock(owner: String, on connection: PostgresConnection) async throws {
        do {
            let taken =
                try await connection.query(
                    "SELECT pg_try_advisory_lock(\(Self.workerLockNamespace), revoker.worker_lock(\(owner)))",
                    logger: self.logger
                ).collect().first?.decode(Bool.self) ?? false
            guard taken else { throw RevokerStoreError(.database, "another session holds the worker's liveness lock") }
            try await connection.run(
                """
                INSERT INTO revoker.workers (owner) VALUES (\(owner))
                ON CONFLICT (owner) DO UPDATE SET locked_at = now(), lock_lost_at = NULL
                """,
                logger: self.logger
            )
        } catch let error as PSQLError where Self.refusesForGood(error.serverInfo?[.sqlState]) {
            throw RevokerStoreError(
                .livenessUnavailable,
                "the database refused the worker's liveness lock or registration",
                detail: "\(StoreDatabase.map(error))"
            )
        }
    }

    /// Whether a server error taking the lock or registering says the role may not (it will
    /// refuse again), rather than that the server cannot now: a standby being promoted answers
    /// `25006` (read-only), a server shutting down `57P01`, and the next try reaches the new
    /// primary. Only a refusal for good sends a worker on without its lock.
    public static func refusesForGood(_ sqlState: String?) -> Bool {
        guard let sqlState else { return false }
        // 42: a missing privilege, table or function (a role without the 0011 grants).
        return sqlState.hasPrefix("42")
    }

    /// Publishes the calls per second `owner` made to each app (migration 0012) and returns the
    /// number of live registered workers (at least one), among which outbound rate limits are shared.
    public func reportCallRates(owner: String, rates: [String: Double], logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        let json = String(decoding: try JSONEncoder().encode(rates.mapValues { ($0 * 100).rounded() / 100 }), as: UTF8.self)
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                WITH me AS (
                    UPDATE revoker.workers SET call_rates = \(json)::jsonb, call_rates_at = now() WHERE owner = \(owner)
                )
                SELECT count(*)::int FROM revoker.workers WHERE lock_lost_at IS NULL
                """,
                logger: logger
            ).collect()
        }
        return max(1, try rows.first?.decode(Int.self) ?? 1)
    }

    /// The registered workers alive now: those whose liveness lock a session holds, as the
    /// rescuer judges them. A worker killed without a clean stop leaves its row behind (until
    /// another worker marks it), so the row alone does not say it lives; the lock does.
    /// Reads `pg_locks`, which every role may: cheap enough for every scrape.
    public func liveWorkers(logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT count(*)::int FROM revoker.workers w
                WHERE EXISTS (
                    SELECT 1 FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.classid = \(Self.workerLockNamespace)::int4::oid AND l.objid = revoker.worker_lock(w.owner)::oid AND l.objsubid = 2
                )
                """,
                logger: logger
            ).collect()
        }
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// The calls per second all live workers made to each app, as they last published them
    /// (within the last ten seconds).
    public func observedCallRates(logger: Logger? = nil) async throws -> [String: Double] {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT rate.key, sum(rate.value::float8) FROM revoker.workers w, jsonb_each_text(w.call_rates) rate
                WHERE w.lock_lost_at IS NULL AND w.call_rates_at > now() - interval '10 seconds'
                GROUP BY rate.key
                """,
                logger: logger
            ).collect()
        }
        var rates: [String: Double] = [:]
        for row in rows {
            let (clientID, rate) = try row.decode((String, Double).self)
            rates[clientID] = rate
        }
        return rates
    }

    /// Wakes every listening worker (`revoker_requests`), as an enqueue does: for requests a
    /// worker handed back that others may take at once.
    public func wakeWorkers(logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try await StoreDatabase.run(logger) {
            _ = try await self.client.query("SELECT pg_notify('revoker_requests', '')", logger: logger).collect()
        }
    }

    /// Removes `owner` from the registered workers (at a clean stop, after its session ended).
    public func unregisterWorker(owner: String, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try await StoreDatabase.run(logger) {
            _ = try await self.client.query("DELETE FROM revoker.workers WHERE owner = \(owner)", logger: logger).collect()
        }
    }
}

/// A worker's own session, which the worker may end (``RevocationQueue/withWorkerSession(owner:opened:registered:_:)``).
public struct WorkerSession: Sendable {
    let connection: PostgresConnection

    /// Closes the session's connection: the session ends with an error and its lock with it.
    public func end() {
        _ = connection.close() as EventLoopFuture<Void>
    }
}
