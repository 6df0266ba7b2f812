/// How the worker runs: concurrency, leases, retries, deadlines.
public struct WorkerSettings: Sendable, Equatable {
    /// Requests processed at once.
    public var concurrency = 16
    /// Requests claimed per round trip.
    public var batchSize = 16
    /// How long a claim is held before another worker may rescue it; extended while in flight.
    public var lease: Duration = .seconds(60)
    /// Attempts before a request ends `failed` / `exhausted`.
    public var maxAttempts = 8
    /// How often expired leases and the requests of workers that are gone are looked for.
    public var rescueInterval: Duration = .seconds(1)
    /// How often the queue is polled when no wake-up arrives.
    public var pollInterval: Duration = .seconds(5)
    /// The first retry delay; it doubles per attempt, with full jitter.
    public var retryBase: Duration = .seconds(2)
    /// The longest retry delay.
    public var retryCap: Duration = .seconds(3600)
    /// How long a paused app waits before a probe.
    public var pauseProbeInterval: Duration = .seconds(300)
    /// How long in-flight requests may run on after SIGTERM before they are released.
    public var shutdownGrace: Duration = .seconds(20)
    /// The lifetime of each client secret a provider signs (Apple's): long enough for one
    /// exchange and one revoke.
    public var clientSecretLifetime: Duration = .seconds(300)
    /// The deadline of each call to a provider.
    public var providerTimeout: Duration = .seconds(10)
    /// The deadline of each database call of the worker. Its statements take milliseconds; one
    /// cut off by a failover is given up soon and its request handed back once the database answers.
    public var databaseTimeout: Duration = .seconds(5)
    /// Calls per second to providers by all worker processes together, in all and per app
    /// (by client_id); nil or absent for no limit.
    public var maxRequestsPerSecond: Double?
    public var appRequestsPerSecond: [String: Double] = [:]
    /// Held grants that no validation has ended on for this long are validated (their refresh
    /// token proven live, nothing revoked); nil: never. At least a day, as Apple asks.
    public var grantValidationInterval: Duration?
    /// How often validations are scheduled, and how many at most each time.
    public var grantValidationPass: Duration = .seconds(60)
    public var grantValidationBatch = 200

    public init() {}
}
