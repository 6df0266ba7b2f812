import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerWorker

extension Benchmark {
    // MARK: Enqueue

    /// Enqueues `requests` made-up credentials through each path into one fresh database.
    func measureEnqueue() async throws -> [BenchmarkReport.EnqueueRate] {
        try await withStage { stage in
            var rates: [BenchmarkReport.EnqueueRate] = []
            for path in EnqueuePath.allCases {
                let grants = Grant.unchecked(options.requests, apps: Self.apps, prefix: "\(path.rawValue)-")
                let rate = try await withOwnClient(stage) { client in
                    try await path.enqueue(
                        grants,
                        width: options.enqueueConcurrency,
                        client: client,
                        configuration: stage.configuration,
                        logger: logger
                    )
                }
                rates.append(rate)
            }
            return rates
        }
    }

    // MARK: Drain

    /// Enqueues a backlog of live grants, then lets `processes` workers drain it while measuring.
    /// - Parameter tracing: whether the workers trace (an OTLP receiver, its spans sampled at the
    ///   ratio) or not (nil): what tracing costs.
    func measureDrain(
        latency: Int,
        processes: Int,
        mixed: Bool = false,
        transport: SandboxTransport? = nil,
        tracing: OTLPReceiver.Sampling? = nil
    ) async throws -> BenchmarkReport.Drain {
        let concurrency = options.concurrency(atLatency: latency)
        let batch = min(options.batchSize, concurrency)
        let worker: [String: any Sendable] = ["concurrency": concurrency, "batch_size": batch]
        let transport = transport ?? options.transport
        return try await withStage(latency: latency, worker: worker, mixed: mixed, transport: transport) { stage in
            let grants = try await Grant.mint(
                options.requests,
                apps: Self.apps,
                googleApp: mixed ? Self.googleApp : nil,
                facebookApp: mixed ? Self.facebookApp : nil,
                prefix: "user-",
                sandbox: stage.sandbox
            )
            let enqueue = try await withOwnClient(stage) { client in
                try await EnqueuePath.swift.enqueue(
                    grants,
                    width: options.enqueueConcurrency,
                    client: client,
                    configuration: stage.configuration,
                    logger: logger
                )
            }
            let counters = try await DatabaseCounters(stage.database, logger: logger)
            let postgresCPU = ProcessStatistics.postgresCPUSeconds(postmaster: counters.postmaster)
            let ownCPU = ProcessStatistics.ownCPUSeconds()
            var problems: [String] = []
            // The benchmark's own connections to the sandbox, open before the workers start.
            let ownConnections = try await stage.sandbox.admin.connections().open
            var peakConnections = ownConnections

            var peakOpenFiles = 0
            let (workerCPU, peakRSS, polls, postgresCPUUsed, ownCPUUsed) = try await withWorkers(
                processes,
                stage: stage,
                environment: tracing?.environment ?? [:]
            ) { workers in
                var cpu = [Double](repeating: 0, count: workers.count)
                var rss = [Int](repeating: 0, count: workers.count)
                let deadline = ContinuousClock.now + .seconds(options.drainTimeoutSeconds)
                let polls = try await withOwnClient(stage) { monitor in
                    var polls = 0
                    while true {
                        for (index, worker) in workers.enumerated() {
                            cpu[index] = ProcessStatistics.cpuSeconds(pid: worker.processIdentifier) ?? cpu[index]
                            rss[index] = ProcessStatistics.peakResidentBytes(pid: worker.processIdentifier) ?? rss[index]
                            peakOpenFiles = max(peakOpenFiles, ProcessStatistics.openFiles(pid: worker.processIdentifier) ?? 0)
                        }
                        let rows = try await monitor.query(
                            "\(unescaped: Self.marker) SELECT count(*) FILTER (WHERE state NOT IN ('pending', 'running'))::int FROM revoker.revocation_requests",
                            logger: logger
                        ).collect()
                        polls += 1
                        peakConnections = max(peakConnections, try await stage.sandbox.admin.connections().open)
                        if try rows.first?.decode(Int.self) ?? 0 >= grants.count { break }
                        if let dead = workers.first(where: { !$0.isRunning }) {
                            problems.append("a worker process exited early: \(dead.stderrSoFar.suffix(500))")
                            break
                        }
                        if ContinuousClock.now > deadline {
                            problems.append("the drain did not finish within \(options.drainTimeoutSeconds) s")
                            break
                        }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    return polls
                }
                return (
                    cpu, rss, polls, ProcessStatistics.postgresCPUSeconds(postmaster: counters.postmaster) - postgresCPU,
                    ProcessStatistics.ownCPUSeconds() - ownCPU
                )
            }

            let used = try await counters.delta(ownTransactions: polls)
            let outcome = try await DrainOutcome(stage.database, logger: logger)
            problems += try await outcome.problems(expected: grants, sandbox: stage.sandbox)
            var auditRowsVerified: Int?
            if options.auditChain {
                let verification = try await AuditVerifier(client: stage.database.client, logger: logger)
                    .verify(keys: stage.configuration.audit.verificationKeys)
                if verification.intact {
                    auditRowsVerified = verification.rowsChecked
                } else {
                    problems.append("the audit trail did not verify: \(verification.problems.prefix(3).map(\.message).joined(separator: "; "))")
                }
            }
            let revocations = Double(max(outcome.revoked, 1))
            return BenchmarkReport.Drain(
                workload: mixed ? "apple+google+facebook" : "apple",
                transport: transport.rawValue,
                providerConnections: peakConnections - ownConnections,
                workerPeakOpenFiles: peakOpenFiles,
                latencyMilliseconds: latency,
                workerProcesses: processes,
                concurrencyPerProcess: concurrency,
                batchSize: batch,
                requests: grants.count,
                enqueue: enqueue,
                seconds: outcome.seconds,
                revocationsPerSecond: outcome.seconds > 0 ? Double(outcome.revoked) / outcome.seconds : 0,
                latency: BenchmarkReport.Percentiles(outcome.latencies),
                workerPeakRSSMegabytes: Double(peakRSS.max() ?? 0) / 1_048_576,
                workerCPUSecondsPer1000: workerCPU.reduce(0, +) / revocations * 1000,
                postgresCPUSecondsPer1000: postgresCPUUsed / revocations * 1000,
                sandboxCPUSecondsPer1000: ownCPUUsed / revocations * 1000,
                statementsPerRevocation: used.statements.map { Double($0) / revocations },
                transactionsPerRevocation: Double(used.transactions) / revocations,
                topStatements: used.top.map {
                    .init(callsPerRevocation: Double($0.calls) / revocations, totalMilliseconds: $0.milliseconds, query: $0.query)
                },
                auditChain: options.auditChain,
                auditRowsVerified: auditRowsVerified,
                valid: problems.isEmpty,
                problems: problems
            )
        }
    }

    // MARK: Pickup

    /// One request at a time on an idle worker: from the enqueue's commit to the sandbox receiving the first call.
    func measurePickup() async throws -> BenchmarkReport.Pickup {
        try await withStage { stage in
            let queue = RevocationQueue(
                client: stage.database.client,
                sealer: stage.configuration.sealer,
                logger: logger
            )
            var problems: [String] = []
            let samples: [Double] = try await withWorkers(1, stage: stage) { workers in
                var samples: [Double] = []
                // The first request warms the worker's connections up; it is not counted.
                for index in 0...options.pickupSamples {
                    let minted = try await stage.sandbox.admin.mintRefreshToken(clientID: Self.apps[0], subject: "pickup-\(index)")
                    let grant = Grant(
                        clientID: Self.apps[0],
                        reference: "pickup-\(index)",
                        kind: .refreshToken,
                        secret: minted.value,
                        grantID: minted.grantID
                    )
                    _ = try await queue.enqueue(grant.newRevocation(), actor: "bench")
                    let committed = Date()
                    let deadline = ContinuousClock.now + .seconds(10)
                    var report = try await stage.sandbox.admin.grant(grant.grantID)
                    while !report.revoked, ContinuousClock.now < deadline, workers[0].isRunning {
                        // Idle between samples, and poll rarely, so the worker is idle when the next one arrives.
                        try await Task.sleep(for: .milliseconds(40))
                        report = try await stage.sandbox.admin.grant(grant.grantID)
                    }
                    guard report.revoked, let first = report.calls.first else {
                        problems.append("request \(index) was not revoked within 10 s")
                        break
                    }
                    if index > 0 { samples.append((first.at - committed.timeIntervalSince1970) * 1000) }
                }
                return samples
            }
            return .init(milliseconds: BenchmarkReport.Percentiles(samples), valid: problems.isEmpty, problems: problems)
        }
    }
}

/// Statement and transaction counters of one database, read before and after a drain.
struct DatabaseCounters {
    let database: ScratchDatabase
    let logger: Logger
    let statementsAvailable: Bool
    let transactionsBefore: Int64
    /// The server's postmaster, whose processes' CPU is measured (0 when the server is not on this machine).
    let postmaster: Int32

    struct Used {
        var statements: Int64?
        var transactions: Int64
        var top: [(calls: Int64, milliseconds: Double, query: String)]
    }

    init(_ database: ScratchDatabase, logger: Logger) async throws {
        self.database = database
        self.logger = logger
        let libraries = try await database.client.query("\(unescaped: Benchmark.marker) SHOW shared_preload_libraries", logger: logger).collect()
        statementsAvailable = try libraries.first?.decode(String.self).contains("pg_stat_statements") ?? false
        let backend = try await database.client.query("\(unescaped: Benchmark.marker) SELECT pg_backend_pid()", logger: logger).collect()
        postmaster = try backend.first.flatMap { ProcessStatistics.parent(of: try $0.decode(Int32.self)) } ?? 0
        if statementsAvailable {
            _ = try await database.client.query("\(unescaped: Benchmark.marker) CREATE EXTENSION IF NOT EXISTS pg_stat_statements", logger: logger)
                .collect()
            _ = try await database.client.query("\(unescaped: Benchmark.marker) SELECT pg_stat_statements_reset()", logger: logger).collect()
        }
        // Backends of closed clients flush their statistics as they exit: give them a moment.
        try await Task.sleep(for: .milliseconds(500))
        transactionsBefore = try await Self.transactions(database, logger: logger)
    }

    private static func transactions(_ database: ScratchDatabase, logger: Logger) async throws -> Int64 {
        let rows = try await database.client.query(
            "\(unescaped: Benchmark.marker) SELECT (xact_commit + xact_rollback)::int8 FROM pg_stat_database WHERE datname = \(database.name)",
            logger: logger
        ).collect()
        return try rows.first?.decode(Int64.self) ?? 0
    }

    /// What the workers used since ``init``; `ownTransactions` (the monitor's polls) is subtracted.
    func delta(ownTransactions: Int) async throws -> Used {
        try await Task.sleep(for: .milliseconds(500))
        let transactions = try await Self.transactions(database, logger: logger) - transactionsBefore - Int64(ownTransactions)
        guard statementsAvailable else { return Used(statements: nil, transactions: transactions, top: []) }
        let rows = try await database.client.query(
            """
            \(unescaped: Benchmark.marker) SELECT calls::int8, total_exec_time::float8, regexp_replace(query, '\\s+', ' ', 'g')
            FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = \(database.name)) AND query NOT LIKE '%revoker-bench%'
            ORDER BY calls DESC
            """,
            logger: logger
        ).collect()
        var statements: Int64 = 0
        var top: [(calls: Int64, milliseconds: Double, query: String)] = []
        for row in rows {
            let (calls, milliseconds, query) = try row.decode((Int64, Double, String).self)
            statements += calls
            if top.count < 10 { top.append((calls, milliseconds, String(query.prefix(160)))) }
        }
        return Used(statements: statements, transactions: transactions, top: top)
    }
}

/// How a drain ended, from the database.
struct DrainOutcome {
    var revoked: Int
    var total: Int
    var byState: [String: Int]
    /// First claim to last finish.
    var seconds: Double
    /// Enqueue to final, per request, in milliseconds.
    var latencies: [Double]

    init(_ database: ScratchDatabase, logger: Logger) async throws {
        let client = database.client
        var byState: [String: Int] = [:]
        for row in try await client.query(
            "\(unescaped: Benchmark.marker) SELECT state || coalesce('/' || outcome, ''), count(*)::int FROM revoker.revocation_requests GROUP BY 1",
            logger: logger
        ).collect() {
            let (state, count) = try row.decode((String, Int).self)
            byState[state] = count
        }
        self.byState = byState
        revoked = byState["succeeded/revoked"] ?? 0
        total = byState.values.reduce(0, +)
        let window = try await client.query(
            """
            \(unescaped: Benchmark.marker) SELECT coalesce(extract(epoch FROM (SELECT max(finished_at) FROM revoker.revocation_requests)
                - (SELECT min(occurred_at) FROM revoker.audit_events WHERE event = 'claimed')), 0)::float8
            """,
            logger: logger
        ).collect()
        seconds = try window.first?.decode(Double.self) ?? 0
        latencies = try await client.query(
            """
            \(unescaped: Benchmark.marker) SELECT (extract(epoch FROM finished_at - created_at) * 1000)::float8
            FROM revoker.revocation_requests WHERE finished_at IS NOT NULL
            """,
            logger: logger
        ).collect().map { try $0.decode(Double.self) }
    }

    /// Why the drain is invalid: requests not revoked, or grants the sandbox did not see revoked.
    func problems(expected grants: [Grant], sandbox: RunningSandbox) async throws -> [String] {
        var problems: [String] = []
        if revoked != grants.count || total != grants.count {
            let states = byState.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
            problems.append("\(revoked) of \(grants.count) requests ended revoked (\(states))")
        }
        let reports = Dictionary(
            uniqueKeysWithValues: try await
                (sandbox.admin.grants() + sandbox.google.grants() + sandbox.admin(for: LocalProvider.facebook.name).grants()).map {
                    ($0.id, $0)
                }
        )
        let unrevoked = grants.filter { reports[$0.grantID]?.revoked != true }.count
        if unrevoked > 0 { problems.append("the sandbox saw \(unrevoked) of \(grants.count) grants not revoked") }
        return problems
    }
}

extension Benchmark {
    /// The same drain with tracing off and on at each ratio of ``BenchmarkOptions/tracingRatios``,
    /// the workers exporting to one OTLP receiver: what tracing costs.
    func measureTracing() async throws -> [BenchmarkReport.Drain] {
        try await OTLPReceiver.with { receiver in
            var drains: [BenchmarkReport.Drain] = []
            for ratio in options.tracingRatios {
                let label = ratio.map { String(format: "%g%%", $0 * 100) } ?? "off"
                let latency = options.tracingLatencyMilliseconds
                progress("drain: \(options.requests) requests, latency \(latency) ms, 1 worker process, tracing \(label)")
                let before = try receiver.spans().count
                var drain = try await measureDrain(
                    latency: latency,
                    processes: 1,
                    tracing: ratio.map { OTLPReceiver.Sampling(receiver: receiver, ratio: $0) }
                )
                // The workers flush their spans as they stop.
                drain.tracing = label
                drain.spansExported = try receiver.spans().count - before
                progress("  \(BenchmarkReport.number(drain.revocationsPerSecond)) revocations/s, \(drain.spansExported ?? 0) spans exported")
                drains.append(drain)
            }
            return drains
        }
    }
}
