import AppleSignIn
import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import Logging
import PostgresNIO
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerWorker

#if canImport(Glibc)
import Glibc
import ProviderSandbox
#endif

/// Measures Revoker end to end on this machine: enqueue rates of the Swift, SQL and HTTP paths;
/// drains of a backlog by 1 and 2 real `revoker work` processes against the in-process Apple
/// sandbox at each latency; pickup latency on an idle worker; and the machine's own limits
/// (pgbench's commit rate, the sandbox alone) to read the figures against.
///
/// Each scenario runs in a fresh database and a fresh sandbox. A drain is valid only when every
/// request ended `succeeded`/`revoked` and the sandbox saw every grant revoked.
public struct Benchmark: Sendable {
    static let apps = ["com.example.bench.notes", "com.example.bench.photos"]
    /// The Google client of the mixed workload.
    static let googleApp = "1000-bench.apps.googleusercontent.com"
    static let facebookApp = "1000000000000001"
    /// Marks the benchmark's own SQL, so that statement counts leave it out.
    static let marker = "/* revoker-bench */"

    /// What this benchmark measures.
    public let options: BenchmarkOptions
    let logger: Logger
    let progress: @Sendable (String) -> Void

    /// - Parameter progress: receives a line per step (to standard error in `revoker bench`).
    public init(
        options: BenchmarkOptions,
        logger: Logger = Logger(label: "revoker.bench", factory: { _ in SwiftLogNoOpLogHandler() }),
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.options = options
        self.logger = logger
        self.progress = progress
    }

    /// Runs every scenario the options name and returns the figures.
    public func run() async throws -> BenchmarkReport {
        let startedAt = Date()
        let machine = try await describeMachine()
        var references = BenchmarkReport.References()
        if options.measureReferences {
            progress("reference: pgbench single-row commits")
            references = try await measurePostgres()
            progress("reference: the sandbox alone")
            references.sandboxAlone = try await measureSandboxAlone()
        }
        progress("enqueue: \(options.requests) requests through each of the Swift API, the SQL function and the HTTP API")
        let enqueue = try await measureEnqueue()
        var drains: [BenchmarkReport.Drain] = []
        for latency in options.latenciesMilliseconds {
            for processes in options.workerProcesses {
                progress(
                    "drain: \(options.requests) requests, Apple latency \(latency) ms, \(processes) worker process(es), concurrency \(options.concurrency(atLatency: latency)) each"
                )
                let drain = try await measureDrain(latency: latency, processes: processes)
                progress(
                    "  \(BenchmarkReport.number(drain.revocationsPerSecond)) revocations/s\(drain.valid ? "" : " INVALID: \(drain.problems.joined(separator: "; "))")"
                )
                drains.append(drain)
            }
        }
        for latency in options.transport == .https ? [] : options.httpsLatenciesMilliseconds {
            progress("drain: \(options.requests) requests over HTTPS with HTTP/2, latency \(latency) ms, 1 worker process")
            let drain = try await measureDrain(latency: latency, processes: 1, transport: .https)
            progress(
                "  \(BenchmarkReport.number(drain.revocationsPerSecond)) revocations/s\(drain.valid ? "" : " INVALID: \(drain.problems.joined(separator: "; "))")"
            )
            drains.append(drain)
        }
        for latency in options.mixedLatenciesMilliseconds {
            progress("drain: \(options.requests) requests, a third each Apple, Google and Facebook grants, latency \(latency) ms, 1 worker process")
            let drain = try await measureDrain(latency: latency, processes: 1, mixed: true)
            progress(
                "  \(BenchmarkReport.number(drain.revocationsPerSecond)) revocations/s\(drain.valid ? "" : " INVALID: \(drain.problems.joined(separator: "; "))")"
            )
            drains.append(drain)
        }
        if !options.tracingRatios.isEmpty {
            drains += try await measureTracing()
        }
        var pickup: BenchmarkReport.Pickup?
        if options.pickupSamples > 0 {
            progress("pickup: \(options.pickupSamples) single requests on an idle worker")
            pickup = try await measurePickup()
        }
        var recovery: BenchmarkReport.Recovery?
        if options.recoveryRequests > 0 {
            progress("recovery: \(options.recoveryRequests) requests, two workers, one SIGKILLed mid-drain")
            recovery = try await measureRecovery(latency: options.recoveryLatencyMilliseconds)
        }
        var custody: [BenchmarkReport.Custody] = []
        for latency in options.custodyLatenciesMilliseconds {
            progress("custody: \(options.custodyAccounts) accounts sign in with 3 grants each, then are deleted by reference; latency \(latency) ms")
            custody.append(try await measureCustody(latency: latency, kill: false))
        }
        if options.custodyKillAccounts > 0 {
            progress("custody: \(options.custodyKillAccounts) accounts, the worker SIGKILLed while registering and while deleting")
            custody.append(try await measureCustody(latency: options.recoveryLatencyMilliseconds, kill: true))
        }
        return BenchmarkReport(
            startedAt: startedAt,
            machine: machine,
            requests: options.requests,
            references: references,
            enqueue: enqueue,
            drains: drains,
            pickup: pickup,
            recovery: recovery,
            custody: custody
        )
    }

    // MARK: Scenario plumbing

    /// A fresh database (migrated) and a fresh sandbox with the two apps registered and their configuration files.
    typealias Stage = LocalStack

    func withStage<T: Sendable>(
        latency: Int = 0,
        worker: [String: any Sendable] = [:],
        mixed: Bool = false,
        transport: SandboxTransport? = nil,
        _ body: (Stage) async throws -> T
    ) async throws -> T {
        try await LocalStack.with(
            transport: transport ?? options.transport,
            apps: [.apple: Self.apps, .google: mixed ? [Self.googleApp] : [], LocalProvider.facebook.name: mixed ? [Self.facebookApp] : []],
            worker: worker,
            sandbox: .init(faults: SandboxFaults(latencyMilliseconds: latency)),
            google: .init(faults: SandboxFaults(latencyMilliseconds: latency)),
            server: options.databaseURL,
            logger: logger
        ) { stage in
            if mixed {
                try await stage.sandbox.admin(for: LocalProvider.facebook.name).setFaults(SandboxFaults(latencyMilliseconds: latency))
            }
            if !options.auditChain {
                for statement in Self.withoutAuditChain {
                    _ = try await stage.database.client.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
                }
            }
            return try await body(stage)
        }
    }

    /// Audit rows stamped as before migration 0006, without their chain: the baseline the
    /// chain's cost is measured against. Never applied outside a benchmark's scratch database.
    static let withoutAuditChain = [
        """
        \(marker) ALTER TABLE revoker.audit_events ALTER COLUMN chain_key DROP NOT NULL, ALTER COLUMN chain_seq DROP NOT NULL,
            ALTER COLUMN prev_hash DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL, ALTER COLUMN txid DROP NOT NULL
        """,
        """
        \(marker) CREATE OR REPLACE FUNCTION revoker.audit_events_stamp_unchained() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$
        BEGIN
            NEW.id := nextval('revoker.audit_events_id_seq');
            NEW.occurred_at := clock_timestamp();
            NEW.recorded_by := session_user;
            RETURN NEW;
        END;
        $$
        """,
        // Each month's partition has its own stamp (migration 0020).
        """
        \(marker) DO $$
        DECLARE partition text;
        BEGIN
            FOR partition IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                             WHERE i.inhparent = 'revoker.audit_events'::regclass LOOP
                EXECUTE format('CREATE OR REPLACE TRIGGER audit_events_stamp BEFORE INSERT ON revoker.%I '
                               'FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_stamp_unchained()', partition);
            END LOOP;
        END $$
        """,
    ]

    /// Runs `body` with a client of its own on the stage's database, closed afterwards, so that
    /// its server backends end and their statistics are flushed.
    func withOwnClient<T: Sendable>(_ stage: Stage, _ body: (PostgresClient) async throws -> T) async throws -> T {
        let app = try await RevokerApp(configuration: stage.configuration, logger: logger)
        return try await app.withRunning { running in try await body(running.database) }
    }

    /// The one integer `query` answers (0 when none), marked as the benchmark's own SQL.
    func countRows(_ query: PostgresQuery, _ client: PostgresClient) async throws -> Int {
        var marked = query
        marked.sql = Self.marker + " " + marked.sql
        return try await client.query(marked, logger: logger).collect().first?.decode(Int.self) ?? 0
    }

    /// `revoker work` processes on the stage (`environment` added to theirs); stopped (SIGTERM,
    /// then SIGKILL) when `body` returns.
    func withWorkers<T: Sendable>(
        _ count: Int,
        stage: Stage,
        environment: [String: String] = [:],
        _ body: ([RevokerProcess]) async throws -> T
    ) async throws -> T {
        let workers = try (0..<count).map { _ in
            try RevokerProcess(["work", "--log-level", "error"], environment: stage.environment.merging(environment) { $1 }, binary: options.binary)
        }
        do {
            let result = try await body(workers)
            await stop(workers)
            return result
        } catch {
            await stop(workers)
            throw error
        }
    }

    private func stop(_ workers: [RevokerProcess]) async {
        for worker in workers { worker.signal(SIGTERM) }
        for worker in workers { _ = try? await worker.wait(timeout: .seconds(30)) }
    }

    // MARK: Machine

    func describeMachine() async throws -> BenchmarkReport.Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":", maxSplits: 1).last?
            .trimmingCharacters(in: .whitespaces) ?? "unknown"
        return try await ScratchDatabase.withScratchDatabase(on: options.databaseURL) { database in
            var settings: [String: String] = [:]
            for name in ["server_version", "fsync", "synchronous_commit", "shared_preload_libraries", "max_connections"] {
                let rows = try await database.client.query(PostgresQuery(unsafeSQL: "\(Self.marker) SHOW \(name)"), logger: logger).collect()
                settings[name] = try rows.first?.decode(String.self) ?? ""
            }
            let version = settings.removeValue(forKey: "server_version") ?? ""
            return .init(
                cores: ProcessInfo.processInfo.activeProcessorCount,
                memoryMegabytes: Int(ProcessInfo.processInfo.physicalMemory / 1_048_576),
                cpuModel: model,
                postgresVersion: version,
                postgresSettings: settings
            )
        }
    }
}
