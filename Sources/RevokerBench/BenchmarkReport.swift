import Foundation

/// Everything one benchmark run measured; written as JSON and printed as a table.
/// Holds no code, token or key.
public struct BenchmarkReport: Codable, Sendable {
    /// The machine and server the figures come from.
    public struct Machine: Codable, Sendable {
        /// Processors available (`nproc`).
        public var cores: Int
        /// Physical memory.
        public var memoryMegabytes: Int
        /// From `/proc/cpuinfo`.
        public var cpuModel: String
        /// `server_version`.
        public var postgresVersion: String
        /// `fsync`, `synchronous_commit`, `shared_preload_libraries` of the server.
        public var postgresSettings: [String: String]
    }

    /// What the machine allows without Revoker.
    public struct References: Codable, Sendable {
        /// pgbench, one `INSERT` per transaction, by client count: transactions per second.
        public var pgbenchCommitsPerSecond: [String: Double] = [:]
        /// Validate + revoke pairs against the sandbox with no database, signing each secret.
        public var sandboxAlone: SandboxAlone?
        /// References that could not be measured, and why.
        public var notes: [String] = []
    }

    /// The sandbox driven directly by an ``AppleSignIn/AppleAppClient``: the ceiling that Apple's side allows here.
    public struct SandboxAlone: Codable, Sendable {
        /// Validate + revoke pairs sent.
        public var pairs: Int
        public var concurrency: Int
        /// Pairs per second of wall-clock time.
        public var pairsPerSecond: Double
        /// CPU of the benchmark process (client and sandbox together) per 1,000 pairs.
        public var cpuSecondsPer1000: Double
    }

    /// One enqueue path's rate.
    public struct EnqueueRate: Codable, Sendable {
        /// `swift`, `sql` or `http`.
        public var path: String
        public var requests: Int
        public var concurrency: Int
        /// Wall-clock time of the enqueues, and requests per second over it.
        public var seconds: Double
        public var perSecond: Double
    }

    /// Milliseconds at the 50th, 95th and 99th percentile, and the largest.
    public struct Percentiles: Codable, Sendable {
        /// Nearest-rank percentiles and the largest value, in milliseconds, over `samples` values.
        public var p50: Double
        public var p95: Double
        public var p99: Double
        public var max: Double
        public var samples: Int
    }

    /// One drain of a backlog.
    public struct Drain: Codable, Sendable {
        /// Whose grants: `apple`, or `apple+google+facebook` (a third of the requests each).
        public var workload: String?
        /// How the workers reached the sandbox: `http1` (plain) or `https` (TLS, HTTP/2 negotiated).
        public var transport: String?
        /// Tracing in the workers: `off`, or the share of traces sampled and exported (`100%`, `1%`);
        /// nil in drains that did not compare it.
        public var tracing: String? = nil
        /// Spans the OTLP receiver got during the drain.
        public var spansExported: Int? = nil
        /// The most connections the workers held open to the sandbox at one time (sampled every 100 ms).
        public var providerConnections: Int?
        /// The most descriptors one worker process held open (sockets, files, pipes; sampled every 100 ms).
        public var workerPeakOpenFiles: Int?
        /// The sandbox's added latency per Apple call.
        public var latencyMilliseconds: Int
        /// `revoker work` processes, each with `concurrencyPerProcess` requests in flight and claims of `batchSize`.
        public var workerProcesses: Int
        public var concurrencyPerProcess: Int
        public var batchSize: Int
        /// Requests in the backlog.
        public var requests: Int
        /// How fast the backlog was enqueued through the Swift API before the workers started.
        public var enqueue: EnqueueRate
        /// From the first claim to the last request final.
        public var seconds: Double
        /// Requests revoked per second of `seconds`.
        public var revocationsPerSecond: Double
        /// Enqueue to final (includes the wait in the backlog).
        public var latency: Percentiles
        /// The largest VmHWM of the worker processes.
        public var workerPeakRSSMegabytes: Double
        /// Worker processes' CPU (user + system) per 1,000 revocations, start-up included.
        public var workerCPUSecondsPer1000: Double
        /// PostgreSQL's CPU (every `postgres` process) per 1,000 revocations.
        public var postgresCPUSecondsPer1000: Double
        /// The benchmark process's CPU (the in-process sandbox) per 1,000 revocations.
        public var sandboxCPUSecondsPer1000: Double
        /// Statements the workers executed (pg_stat_statements, BEGIN/COMMIT included) per revocation;
        /// nil when pg_stat_statements is not loaded.
        public var statementsPerRevocation: Double?
        /// Committed and rolled-back transactions of the workers (pg_stat_database) per revocation.
        public var transactionsPerRevocation: Double
        /// The most frequent worker statements and their calls per revocation.
        public var topStatements: [Statement]
        /// Whether the audit trail was chained, and the rows `revoker audit verify` found intact
        /// after the drain (nil without the chain).
        public var auditChain: Bool
        public var auditRowsVerified: Int?
        /// Whether every request was revoked and the sandbox saw every grant revoked; if not, why.
        public var valid: Bool
        public var problems: [String]
    }

    /// A statement as pg_stat_statements normalised it.
    public struct Statement: Codable, Sendable {
        /// Calls per revocation, their total execution time, and the normalised text (no values).
        public var callsPerRevocation: Double
        public var totalMilliseconds: Double
        public var query: String
    }

    /// Enqueue (commit) to the first Apple call, one request at a time on an idle worker.
    public struct Pickup: Codable, Sendable {
        /// The pickup latencies; `valid` is false (with `problems`) when a request was not revoked in time.
        public var milliseconds: Percentiles
        public var valid: Bool
        public var problems: [String]
    }

    /// Two workers drain a backlog and one is SIGKILLed mid-drain, while it holds requests.
    public struct Recovery: Codable, Sendable {
        public var requests: Int
        public var latencyMilliseconds: Int
        /// Requests the killed worker held (running) when it died.
        public var orphaned: Int
        /// From the kill until every one of them was final (sampled every 100 ms).
        public var secondsToFinal: Double
        /// From the kill until the survivor put the first of them back in the queue (the
        /// database's clock, which is this machine's); -1 when none was rescued.
        public var secondsToRescue: Double
        /// Whether every request was revoked, each grant once; if not, why.
        public var valid: Bool
        public var problems: [String]
    }

    /// Custody: codes registered at sign-in (`POST /v1/grants`) and accounts deleted by reference.
    public struct Custody: Codable, Sendable {
        public var latencyMilliseconds: Int
        /// Times the worker was SIGKILLed (and replaced) during the run.
        public var killed: Int
        public var accounts: Int
        public var registrations: Int
        public var registrationConcurrency: Int
        /// Registrations answered per second, each a code exchanged by the worker within the wait.
        public var registrationsPerSecond: Double
        public var registrationMilliseconds: Percentiles
        /// Registrations answered `202` (the exchange outlasted `http.grant_exchange_wait_seconds`).
        public var answeredLater: Int
        /// Grants that ended `exchange_lost` (a code the killed worker was exchanging).
        public var exchangesLost: Int
        /// From `POST /v1/accounts/{reference}/deletion` to its `account.deletion_completed` in the feed.
        public var deletionToCompletedMilliseconds: Percentiles
        public var valid: Bool
        public var problems: [String]
    }

    /// When the run started, the machine, and the requests per enqueue path and per drain.
    public var startedAt: Date
    public var machine: Machine
    public var requests: Int
    /// The machine's own limits, the enqueue rates, the drains and the pickup latency.
    public var references: References
    public var enqueue: [EnqueueRate]
    public var drains: [Drain]
    public var pickup: Pickup?
    public var recovery: Recovery?
    public var custody: [Custody] = []
    /// Every scenario finished every request, and the sandbox saw each grant revoked.
    public var valid: Bool

    init(
        startedAt: Date,
        machine: Machine,
        requests: Int,
        references: References,
        enqueue: [EnqueueRate],
        drains: [Drain],
        pickup: Pickup?,
        recovery: Recovery?,
        custody: [Custody]
    ) {
        self.startedAt = startedAt
        self.machine = machine
        self.requests = requests
        self.references = references
        self.enqueue = enqueue
        self.drains = drains
        self.pickup = pickup
        self.recovery = recovery
        self.custody = custody
        self.valid = drains.allSatisfy(\.valid) && (pickup?.valid ?? true) && (recovery?.valid ?? true) && custody.allSatisfy(\.valid)
    }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return try encoder.encode(self)
    }
}

extension BenchmarkReport {
    /// The figures as plain-text tables.
    public func table() -> String {
        var lines: [String] = []
        lines.append(
            "Machine: \(machine.cores) cores, \(machine.memoryMegabytes) MB, \(machine.cpuModel); PostgreSQL \(machine.postgresVersion) "
                + machine.postgresSettings.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        )
        lines.append("")
        lines.append("Reference limits")
        for (clients, tps) in references.pgbenchCommitsPerSecond.sorted(by: { (Int($0.key) ?? 0) < (Int($1.key) ?? 0) }) {
            lines.append("  pgbench single-row INSERT commits, \(clients) client(s): \(Self.number(tps))/s")
        }
        if let alone = references.sandboxAlone {
            lines.append(
                "  sandbox alone (sign + validate + revoke, no database), concurrency \(alone.concurrency): \(Self.number(alone.pairsPerSecond)) pairs/s, "
                    + "\(Self.decimal(alone.cpuSecondsPer1000, 2)) CPU s per 1,000"
            )
        }
        for note in references.notes { lines.append("  note: \(note)") }
        lines.append("")
        lines.append("Enqueue (\(requests) requests per path)")
        for rate in enqueue {
            lines.append(
                "  \(rate.path.padding(toLength: 6, withPad: " ", startingAt: 0)) \(Self.number(rate.perSecond))/s (concurrency \(rate.concurrency))"
            )
        }
        lines.append("")
        let header = [
            "grants", "via", "conns", "fds", "latency ms", "procs", "conc", "rev/s", "p50 ms", "p95 ms", "p99 ms", "RSS MB", "CPU s/1k", "PG CPU/1k",
            "stmts/rev",
            "xacts/rev",
            "audit", "tracing", "valid",
        ]
        var rows = [header]
        for drain in drains {
            rows.append([
                drain.workload ?? "apple", drain.transport ?? "http1", drain.providerConnections.map { "\($0)" } ?? "-",
                drain.workerPeakOpenFiles.map { "\($0)" } ?? "-",
                "\(drain.latencyMilliseconds)", "\(drain.workerProcesses)", "\(drain.concurrencyPerProcess)",
                Self.number(drain.revocationsPerSecond),
                Self.number(drain.latency.p50), Self.number(drain.latency.p95), Self.number(drain.latency.p99),
                Self.decimal(drain.workerPeakRSSMegabytes, 1), Self.decimal(drain.workerCPUSecondsPer1000, 2),
                Self.decimal(drain.postgresCPUSecondsPer1000, 2), drain.statementsPerRevocation.map { Self.decimal($0, 2) } ?? "-",
                Self.decimal(drain.transactionsPerRevocation, 2),
                drain.auditChain ? drain.auditRowsVerified.map { "\($0) ok" } ?? "NOT OK" : "no chain",
                drain.tracing.map { tracing in drain.spansExported.map { "\(tracing) (\($0) spans)" } ?? tracing } ?? "-", drain.valid ? "yes" : "NO",
            ])
        }
        lines.append(
            "Drain (\(requests) requests: 80% refresh tokens, 20% authorization codes; apple: two Apple apps, apple+google+facebook: a third of the requests each provider's)"
        )
        lines += Self.align(rows).map { "  " + $0 }
        if let pickup {
            lines.append("")
            let ms = pickup.milliseconds
            lines.append(
                "Pickup on an idle worker (\(ms.samples) requests): p50 \(Self.decimal(ms.p50, 1)) ms, p95 \(Self.decimal(ms.p95, 1)) ms, "
                    + "p99 \(Self.decimal(ms.p99, 1)) ms, max \(Self.decimal(ms.max, 1)) ms" + (pickup.valid ? "" : " (INVALID)")
            )
        }
        if let recovery {
            lines.append("")
            lines.append(
                "Recovery (\(recovery.requests) requests, \(recovery.latencyMilliseconds) ms, two workers, one SIGKILLed mid-drain): "
                    + "the \(recovery.orphaned) requests it held were rescued \(Self.decimal(recovery.secondsToRescue, 1)) s and final "
                    + "\(Self.decimal(recovery.secondsToFinal, 1)) s after the kill"
                    + (recovery.valid ? "" : " (INVALID)")
            )
        }
        for run in custody {
            let (registration, deletion) = (run.registrationMilliseconds, run.deletionToCompletedMilliseconds)
            lines.append("")
            lines.append(
                "Custody (\(run.accounts) accounts x 3 grants, \(run.latencyMilliseconds) ms\(run.killed > 0 ? ", worker SIGKILLed \(run.killed) times" : "")): "
                    + "\(Self.number(run.registrationsPerSecond)) registrations/s with \(run.registrationConcurrency) callers "
                    + "(p50 \(Self.number(registration.p50)) ms, p99 \(Self.number(registration.p99)) ms, \(run.answeredLater) answered 202, "
                    + "\(run.exchangesLost) exchange_lost); deletion to account.deletion_completed p50 \(Self.number(deletion.p50)) ms, "
                    + "p99 \(Self.number(deletion.p99)) ms over \(deletion.samples)" + (run.valid ? "" : " (INVALID)")
            )
        }
        let problems =
            drains.flatMap { drain in
                drain.problems.map { "\(drain.workload ?? "apple"), \(drain.latencyMilliseconds) ms, \(drain.workerProcesses) process(es): \($0)" }
            }
            + (pickup?.problems ?? []).map { "pickup: \($0)" }
            + (recovery?.problems ?? []).map { "recovery: \($0)" }
            + custody.flatMap { run in run.problems.map { "custody, \(run.latencyMilliseconds) ms\(run.killed > 0 ? ", killed" : ""): \($0)" } }
        if !problems.isEmpty {
            lines.append("")
            lines.append("INVALID RUN:")
            lines += problems.map { "  " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    static func number(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : decimal(value, 1)
    }

    static func decimal(_ value: Double, _ places: Int) -> String {
        String(format: "%.\(places)f", value)
    }

    static func align(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in String(repeating: " ", count: widths[index] - cell.count) + cell }.joined(separator: "  ")
        }
    }
}
