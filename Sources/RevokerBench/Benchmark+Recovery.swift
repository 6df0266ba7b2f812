import AppleSignInSandbox
import Foundation
import PostgresNIO
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore

extension Benchmark {
    // MARK: Recovery

    /// Two worker processes drain a backlog at `latency`; once ``BenchmarkOptions/recoveryKillAfterShare``
    /// of it is final, the one holding more requests is SIGKILLed (while it holds some). Measures how long after the kill the requests it held were all final (the
    /// other worker rescues them once the dead one's liveness lock has stayed free), and checks
    /// that every grant was revoked exactly once.
    func measureRecovery(latency: Int) async throws -> BenchmarkReport.Recovery {
        let concurrency = options.concurrency(atLatency: latency)
        let worker: [String: any Sendable] = ["concurrency": concurrency, "batch_size": min(options.batchSize, concurrency)]
        return try await withStage(latency: latency, worker: worker) { stage in
            let count = options.recoveryRequests
            let grants = try await Grant.mint(count, apps: Self.apps, prefix: "recovery-", sandbox: stage.sandbox)
            _ = try await withOwnClient(stage) { client in
                try await EnqueuePath.swift.enqueue(
                    grants,
                    width: options.enqueueConcurrency,
                    client: client,
                    configuration: stage.configuration,
                    logger: logger
                )
            }
            var problems: [String] = []
            let (orphaned, secondsToFinal, secondsToRescue) = try await withWorkers(2, stage: stage) { workers in
                try await withOwnClient(stage) { monitor in
                    let deadline = ContinuousClock.now + .seconds(options.drainTimeoutSeconds)
                    var orphaned: [UUID]?
                    var killedAt = ContinuousClock.now
                    var killedAtDatabase = Date()
                    while ContinuousClock.now < deadline {
                        if let orphaned {
                            let open = try await countRows(
                                "SELECT count(*)::int FROM revoker.revocation_requests WHERE id = ANY(\(orphaned)) AND state IN ('pending', 'running')",
                                monitor
                            )
                            if open == 0 {
                                let finalAt = ContinuousClock.now
                                // The outcome is judged once the survivor has finished the rest of
                                // the backlog too, however long a loaded machine takes.
                                while ContinuousClock.now < deadline,
                                    try await countRows(
                                        "SELECT count(*)::int FROM revoker.revocation_requests WHERE state IN ('pending', 'running')",
                                        monitor
                                    ) > 0
                                {
                                    try await Task.sleep(for: .milliseconds(100))
                                }
                                // When the survivor put them back, on the database's clock beside the kill's.
                                let rescued = try await monitor.query(
                                    """
                                    \(unescaped: Self.marker) SELECT coalesce(extract(epoch FROM min(occurred_at) - \(killedAtDatabase)::timestamptz), -1)::float8
                                    FROM revoker.audit_events WHERE event = 'rescued' AND request_id = ANY(\(orphaned))
                                    """,
                                    logger: logger
                                ).collect()
                                return (orphaned, (finalAt - killedAt).timeInterval, try rescued.first?.decode(Double.self) ?? -1)
                            }
                        } else if case let final = try await countRows(
                            "SELECT count(*)::int FROM revoker.revocation_requests WHERE state NOT IN ('pending', 'running')",
                            monitor
                        ), Double(final) >= Double(count) * options.recoveryKillAfterShare {
                            if final == count {
                                problems.append("the backlog was done before a worker could be killed holding requests")
                                return ([], 0, -1)
                            }
                            // Owner ids are host:pid:random. The victim is the worker holding the
                            // most requests right now; those it holds when killed die with it.
                            let holders = try await monitor.query(
                                """
                                \(unescaped: Self.marker) SELECT split_part(lease_owner, ':', 2) FROM revoker.revocation_requests
                                WHERE state = 'running' GROUP BY 1 ORDER BY count(*) DESC
                                """,
                                logger: logger
                            ).collect()
                            let pids = try holders.map { try $0.decode(String.self) }
                            if let victim = workers.first(where: { pids.first == String($0.processIdentifier) }) {
                                victim.signal(SIGKILL)
                                killedAt = ContinuousClock.now
                                killedAtDatabase = Date()
                                let held = try await monitor.query(
                                    """
                                    \(unescaped: Self.marker) SELECT id FROM revoker.revocation_requests
                                    WHERE state = 'running' AND split_part(lease_owner, ':', 2) = \(String(victim.processIdentifier))
                                    """,
                                    logger: logger
                                ).collect()
                                orphaned = try held.map { try $0.decode(UUID.self) }
                            }
                        }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    problems.append("the killed worker's requests were not all final within \(options.drainTimeoutSeconds) s")
                    return (orphaned ?? [], Double(options.drainTimeoutSeconds), -1)
                }
            }
            // A request whose revoke the killed worker sent before dying ends already_invalid when
            // rescued: Apple has revoked the grant, once, which the sandbox's count shows. One whose
            // code the killed worker was exchanging ends exchange_lost (Apple took the code, the
            // refresh token died with the worker): the documented outcome, so allowed for those it
            // held, whose grants are then revoked never, and never twice.
            let outcome = try await DrainOutcome(stage.database, logger: logger)
            let lost = try await withOwnClient(stage) { client in
                try await client.query(
                    """
                    \(unescaped: Self.marker) SELECT external_reference, id = ANY(\(orphaned)) AND credential_kind = 'authorization_code'
                    FROM revoker.revocation_requests WHERE outcome = 'exchange_lost'
                    """,
                    logger: logger
                ).collect().map { try $0.decode((String, Bool).self) }
            }
            let succeeded = (outcome.byState["succeeded/revoked"] ?? 0) + (outcome.byState["succeeded/already_invalid"] ?? 0)
            let excused = lost.filter(\.1).count
            if succeeded + excused != count { problems.append("\(count - succeeded) of \(count) requests did not succeed: \(outcome.byState)") }
            let lostReferences = Set(lost.filter(\.1).map(\.0))
            let lostGrants = Set(grants.filter { lostReferences.contains($0.reference) }.map(\.grantID))
            let reports = try await stage.sandbox.admin.grants()
            let notOnce = reports.filter { $0.revocations != 1 && !($0.revocations == 0 && lostGrants.contains($0.id)) }.count
            if notOnce > 0 { problems.append("\(notOnce) grants were not revoked exactly once") }
            if orphaned.isEmpty { problems.append("the killed worker held no request: nothing was measured") }
            return .init(
                requests: count,
                latencyMilliseconds: latency,
                orphaned: orphaned.count,
                secondsToFinal: secondsToFinal,
                secondsToRescue: secondsToRescue,
                valid: problems.isEmpty,
                problems: problems
            )
        }
    }
}
