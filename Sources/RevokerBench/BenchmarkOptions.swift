import RevokerLocalStack

/// What one benchmark run measures, and how hard.
public struct BenchmarkOptions: Sendable {
    /// Requests enqueued per enqueue path and drained per scenario.
    public var requests = 10_000
    /// The sandbox's added latency per `/auth` call, in milliseconds; one drain series per value.
    public var latenciesMilliseconds = [0, 200]
    /// Worker processes per drain (each value is run at every latency).
    public var workerProcesses = [1, 2]
    /// Requests in flight per worker process, by latency; latencies not listed use ``defaultConcurrency``.
    /// More in flight means larger shared statements (docs/benchmarks.md has the comparison).
    public var concurrencyByLatency: [Int: Int] = [0: 256, 200: 1024]
    /// Requests in flight per worker process at latencies without an entry in ``concurrencyByLatency``.
    public var defaultConcurrency = 256
    /// Requests claimed per round trip (worker.batch_size), capped by the concurrency.
    public var batchSize = 128
    /// pgbench client counts for the commit-rate reference.
    public var pgbenchClients = [1, 16]
    /// Concurrent callers on each enqueue path.
    public var enqueueConcurrency = 16
    /// Single requests sent to an idle worker to measure pickup latency.
    public var pickupSamples = 200
    /// Whether to measure pgbench's commit rate and the sandbox alone.
    public var measureReferences = true
    /// Transactions of each pgbench reference run (split among its clients).
    public var referenceTransactions = 40_000
    /// The `revoker` binary started as worker processes.
    public var binary: String
    /// The PostgreSQL server (`postgres://…`); each scenario gets a database of its own on it.
    public var databaseURL: String
    /// A drain that has not finished after this many seconds is reported invalid.
    public var drainTimeoutSeconds = 600
    /// Whether the audit trail is chained (migration 0006, as deployed). Off, each scenario's
    /// database stamps audit rows as before 0006: only to measure what the chain costs.
    public var auditChain = true
    /// Latencies at which one more drain (by one worker process) runs a mixed workload: every
    /// other request a Google grant, beside Apple's.
    public var mixedLatenciesMilliseconds = [0]
    /// How the workers reach the sandbox in every scenario but the ones below.
    public var transport: SandboxTransport = .http1
    /// Latencies at which one more drain (by one worker process) reaches the sandbox as Apple is
    /// reached in production, over HTTPS with HTTP/2 (when ``transport`` is not that already).
    public var httpsLatenciesMilliseconds = [0]
    /// Requests of the recovery scenario (two workers, one SIGKILLed mid-drain); 0 skips it.
    public var recoveryRequests = 5_000
    /// The sandbox's latency in the recovery scenario, so that the killed worker holds requests in flight.
    public var recoveryLatencyMilliseconds = 200
    /// The share of the recovery backlog final before the busiest worker is killed; 0 kills it
    /// as soon as it holds requests.
    public var recoveryKillAfterShare = 1.0 / 3
    /// Custody: accounts signing in with three grants each (two Apple apps and Google), at each
    /// latency; an empty list skips it.
    public var custodyLatenciesMilliseconds = [0, 200]
    public var custodyAccounts = 300
    /// Accounts whose deletion is timed alone, one after another (the rest go together).
    public var custodyDeletionSamples = 50
    /// Tracing drains: one drain (by one worker process, at ``tracingLatencyMilliseconds``) per entry,
    /// with tracing off (nil) or on at that sampling ratio, exporting to an OTLP receiver
    /// (`scripts/otlp-receiver`); empty skips them.
    public var tracingRatios: [Double?] = []
    /// The sandbox's latency in the tracing drains.
    public var tracingLatencyMilliseconds = 0
    /// Accounts of the custody run whose worker is SIGKILLed in each phase (at ``recoveryLatencyMilliseconds``); 0 skips it.
    public var custodyKillAccounts = 100

    /// The full run's defaults, with the `revoker` binary to start as workers and the server to use.
    public init(binary: String, databaseURL: String) {
        self.binary = binary
        self.databaseURL = databaseURL
    }

    /// A quick correctness run (CI): few requests, no latency, 1 and 2 workers, no references.
    public static func smoke(binary: String, databaseURL: String) -> BenchmarkOptions {
        var options = BenchmarkOptions(binary: binary, databaseURL: databaseURL)
        options.requests = 60
        options.latenciesMilliseconds = [0]
        options.concurrencyByLatency = [0: 8]
        options.batchSize = 8
        options.enqueueConcurrency = 4
        options.pickupSamples = 5
        // Half a second per call and 8 in flight per worker, so that the killed worker surely
        // holds requests when it dies (with 256 in flight at 200 ms, a loaded CI run once found
        // the whole backlog finished together and the victim holding none).
        options.recoveryRequests = 60
        options.recoveryLatencyMilliseconds = 500
        // Killed as soon as it holds requests, not once a third is final: a monitor slowed by a
        // loaded machine could otherwise see the backlog finish before it kills anything.
        options.recoveryKillAfterShare = 0
        options.concurrencyByLatency[500] = 8
        options.measureReferences = false
        options.drainTimeoutSeconds = 120
        options.custodyLatenciesMilliseconds = [0]
        options.custodyAccounts = 8
        options.custodyDeletionSamples = 3
        options.custodyKillAccounts = 12
        return options
    }

    /// Requests in flight per worker process at `latency`.
    public func concurrency(atLatency latency: Int) -> Int {
        concurrencyByLatency[latency] ?? defaultConcurrency
    }
}
