import ArgumentParser
import Foundation
import RevokerBench
import RevokerLocalStack

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure throughput, latency, memory and database cost per revocation against the Apple sandbox.",
        discussion: """
            Needs DATABASE_URL (a server it may create databases on; with pg_stat_statements in \
            shared_preload_libraries it also counts statements). `scripts/bench` builds in release \
            mode, starts a throw-away PostgreSQL so configured, and runs this. Worker processes are \
            this binary running `work`. Exit code 1 when a result fails its own check.

            Example:
              revoker bench --requests 10000 --json bench.json
            """
    )

    @Option(help: "Requests per enqueue path and per drain.")
    var requests: Int?

    @Option(help: "The sandbox's added latency per Apple call, in ms, comma-separated, or 'none' (no drain).")
    var latencies: String?

    @Option(help: "Worker process counts, comma-separated.")
    var workers: String?

    @Option(
        name: .customLong("mixed-latencies"),
        help:
            "Latencies (ms, comma-separated) of the drains by one worker of a mixed workload, every other request a Google grant; 'none' for none (default 0)."
    )
    var mixedLatencies: String?

    @Option(help: "How workers reach the sandbox in every drain: http1 (plain, the default) or https (TLS with HTTP/2, as Apple serves).")
    var transport: String?

    @Option(
        name: .customLong("https-latencies"),
        help: "Latencies (ms, comma-separated) of one more drain by one worker over HTTPS with HTTP/2; 'none' for none (default 0)."
    )
    var httpsLatencies: String?

    @Option(help: "Requests in flight per worker process, as LATENCY:COUNT pairs, comma-separated (default 0:256,200:1024).")
    var concurrency: String?

    @Option(name: .customLong("batch-size"), help: "Requests claimed per round trip (capped by the concurrency).")
    var batchSize: Int?

    @Option(name: .customLong("pickup-samples"), help: "Single requests timed on an idle worker.")
    var pickupSamples: Int?

    @Option(
        name: .customLong("recovery-requests"),
        help: "Requests of the recovery scenario (two workers, one SIGKILLed a third of the way through); 0 skips it (default 5000)."
    )
    var recoveryRequests: Int?

    @Option(
        name: .customLong("custody-latencies"),
        help:
            "Latencies, in ms, of the custody scenario (codes registered at sign-in, accounts deleted by reference), comma-separated, or 'none' (default 0,200)."
    )
    var custodyLatencies: String?

    @Option(name: .customLong("custody-accounts"), help: "Accounts of the custody scenario, three grants each (default 300).")
    var custodyAccounts: Int?

    @Option(
        name: .customLong("custody-kill-accounts"),
        help: "Accounts of the custody run whose worker is SIGKILLed while registering and while deleting; 0 skips it (default 100)."
    )
    var custodyKillAccounts: Int?

    @Option(
        help: ArgumentHelp(
            "Drains by one worker with tracing off or on: sampling ratios, comma-separated, 'off' for none (e.g. off,1,0.01); spans go to an OTLP receiver.",
            valueName: "ratios"
        )
    )
    var tracing: String?

    @Option(name: .customLong("tracing-latency"), help: "The sandbox's latency in the --tracing drains, in ms (default 0).")
    var tracingLatency: Int?

    @Flag(name: .customLong("no-references"), help: "Skip pgbench and the sandbox-alone reference.")
    var noReferences = false

    @Flag(help: "A quick correctness run (CI): 60 requests, 0 ms, 1 and 2 workers, no references.")
    var smoke = false

    @Flag(
        name: .customLong("without-audit-chain"),
        help: "Stamp audit rows as before migration 0006, without their hash chain, to measure what the chain costs."
    )
    var withoutAuditChain = false

    @Option(help: ArgumentHelp("Write the results as JSON to this file.", valueName: "file"))
    var json: String?

    @Flag(
        help: """
            Instead: write years of history into a kept database, resuming one already begun; `scripts/bench-history` \
            then measures the trail, the searches, the drain and prune at that size.
            """
    )
    var history = false

    @Option(name: .customLong("audit-rows"), help: "With --history: audit rows to reach (default 10000000).")
    var auditRows: Int?

    @Option(help: "With --history: grants held at the end (default 1000000).")
    var grants: Int?

    @Option(help: "With --history: days of history, ending yesterday (default 730).")
    var days: Int?

    @Option(name: .customLong("checkpoints-per-day"), help: "With --history: checkpoints signed a day, each over its part (default 24).")
    var checkpointsPerDay: Int?

    @Option(name: .customLong("history-database"), help: "With --history: the database it is kept in (default revoker_history).")
    var historyDatabase: String?

    @Option(
        name: .customLong("history-keys"),
        help: ArgumentHelp("With --history: where its sealing and audit keys are kept (default .build/history/<database>).", valueName: "dir")
    )
    var historyKeys: String?

    func run() async throws {
        guard let databaseURL = ProcessInfo.processInfo.environment["DATABASE_URL"], !databaseURL.isEmpty else {
            throw fail("The benchmark needs DATABASE_URL; `scripts/bench` starts a throw-away PostgreSQL and runs it.")
        }
        let binary = Bundle.main.executablePath ?? CommandLine.arguments[0]
        if history { return try await runHistory(databaseURL: databaseURL, binary: binary) }
        var options =
            smoke ? BenchmarkOptions.smoke(binary: binary, databaseURL: databaseURL) : BenchmarkOptions(binary: binary, databaseURL: databaseURL)
        if let requests { options.requests = requests }
        if let latencies { options.latenciesMilliseconds = latencies == "none" ? [] : try Self.integers(latencies, "--latencies") }
        if let workers { options.workerProcesses = try Self.integers(workers, "--workers") }
        if let mixedLatencies {
            options.mixedLatenciesMilliseconds = mixedLatencies == "none" ? [] : try Self.integers(mixedLatencies, "--mixed-latencies")
        }
        if let transport {
            guard let value = SandboxTransport(rawValue: transport) else { throw ValidationError("--transport takes http1 or https.") }
            options.transport = value
        }
        if let httpsLatencies {
            options.httpsLatenciesMilliseconds = httpsLatencies == "none" ? [] : try Self.integers(httpsLatencies, "--https-latencies")
        }
        if let concurrency {
            for pair in concurrency.split(separator: ",") {
                let parts = try Self.integers(pair.replacingOccurrences(of: ":", with: ","), "--concurrency")
                guard parts.count == 2, (1...1024).contains(parts[1]) else {
                    throw ValidationError("--concurrency takes LATENCY:COUNT pairs, COUNT 1-1024.")
                }
                options.concurrencyByLatency[parts[0]] = parts[1]
            }
        }
        if let batchSize { options.batchSize = batchSize }
        if let pickupSamples { options.pickupSamples = pickupSamples }
        if let recoveryRequests { options.recoveryRequests = recoveryRequests }
        if let custodyLatencies {
            options.custodyLatenciesMilliseconds = custodyLatencies == "none" ? [] : try Self.integers(custodyLatencies, "--custody-latencies")
        }
        if let custodyAccounts {
            guard (1...100_000).contains(custodyAccounts) else { throw ValidationError("--custody-accounts must be between 1 and 100000.") }
            options.custodyAccounts = custodyAccounts
        }
        if let custodyKillAccounts {
            guard (0...100_000).contains(custodyKillAccounts) else { throw ValidationError("--custody-kill-accounts must be between 0 and 100000.") }
            options.custodyKillAccounts = custodyKillAccounts
        }
        if let tracing { options.tracingRatios = try Self.ratios(tracing) }
        if let tracingLatency {
            guard (0...10_000).contains(tracingLatency) else { throw ValidationError("--tracing-latency must be between 0 and 10000.") }
            options.tracingLatencyMilliseconds = tracingLatency
        }
        if noReferences { options.measureReferences = false }
        if withoutAuditChain { options.auditChain = false }
        guard (1...1_000_000).contains(options.requests) else { throw ValidationError("--requests must be between 1 and 1000000.") }

        let benchmark = Benchmark(options: options) { line in
            FileHandle.standardError.write(Data("bench: \(line)\n".utf8))
        }
        let report = try await benchmark.run()
        if let json { try report.json().write(to: URL(fileURLWithPath: json)) }
        print(report.table())
        if !report.valid { throw Exit.someFailed }
    }

    func runHistory(databaseURL: String, binary: String) async throws {
        let database = historyDatabase ?? "revoker_history"
        var options = HistoryOptions(serverURL: databaseURL, keysDirectory: historyKeys ?? ".build/history/\(database)")
        options.database = database
        if let auditRows {
            guard (1_000...1_000_000_000).contains(auditRows) else { throw ValidationError("--audit-rows must be between 1000 and 1000000000.") }
            options.auditRows = auditRows
        }
        if let grants {
            guard (0...100_000_000).contains(grants) else { throw ValidationError("--grants must be between 0 and 100000000.") }
            options.grants = grants
        }
        if let days {
            guard (1...3650).contains(days) else { throw ValidationError("--days must be between 1 and 3650.") }
            options.days = days
        }
        if let checkpointsPerDay {
            guard (1...1440).contains(checkpointsPerDay) else { throw ValidationError("--checkpoints-per-day must be between 1 and 1440.") }
            options.checkpointsPerDay = checkpointsPerDay
        }
        let progress: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data("bench: \(line)\n".utf8)) }
        let summary = try await HistoryGenerator(options: options, progress: progress).run()
        progress(
            "history: \(summary.days) days, \(summary.auditRows) audit rows, \(summary.revocations) revocations, \(summary.grants) grants held, "
                + "\(summary.checkpoints) checkpoints; \(summary.daysWrittenNow) days written in \(Int(summary.seconds)) s"
        )
    }

    /// `off,1,0.01`: nil for off, else a ratio from 0 to 1.
    static func ratios(_ text: String) throws -> [Double?] {
        try text.split(separator: ",").map { part in
            let item = part.trimmingCharacters(in: .whitespaces)
            if item == "off" { return nil }
            guard let ratio = Double(item), (0...1).contains(ratio) else {
                throw ValidationError("--tracing takes comma-separated sampling ratios from 0 to 1, or 'off'.")
            }
            return ratio
        }
    }

    static func integers(_ text: String, _ option: String) throws -> [Int] {
        let parts = text.split(separator: ",")
        let values = parts.compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 >= 0 }
        guard !values.isEmpty, values.count == parts.count else {
            throw ValidationError("\(option) takes comma-separated non-negative integers.")
        }
        return values
    }
}
