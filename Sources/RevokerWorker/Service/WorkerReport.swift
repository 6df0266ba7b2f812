import RevokerStore

/// What a worker did with the requests it claimed (the `drain` summary).
public struct WorkerReport: Sendable, Equatable {
    /// Requests finished, by outcome.
    public var finished: [RevocationOutcome: Int] = [:]
    /// Retries scheduled (a request retried twice counts twice).
    public var retriesScheduled = 0
    /// Requests put back because their app is paused.
    public var paused = 0
    /// Requests handed back unfinished at shutdown, at the end of the time allowed, or until
    /// their app's rate limit has a call slot for them.
    public var released = 0
    /// Requests whose lease was lost or whose processing was cut off by a database failure
    /// (a drain waits for those to be rescued and tries them again).
    public var interrupted = 0
    /// Requests this worker touched that it left unfinished (waiting for a retry, paused, handed back).
    public var unfinished = 0
    /// Whether the run stopped because its time ran out.
    public var timedOut = false
    /// What the queue held when a drain ended, counted from the database (other processes'
    /// requests and paused apps included); nil for a continuous worker, or when the database
    /// could not tell.
    public var remainder: QueueRemainder?

    public init() {}

    mutating func add(_ disposition: Disposition) {
        switch disposition {
        case .finished(let outcome): finished[outcome, default: 0] += 1
        case .retryScheduled: retriesScheduled += 1
        case .paused: paused += 1
        case .released, .postponed: released += 1
        case .leaseLost, .interrupted: interrupted += 1
        }
    }

    /// Requests finished as `failed`.
    public var failed: Int { finished.filter { $0.key.state == .failed }.values.reduce(0, +) }
    /// Requests finished as `succeeded`.
    public var succeeded: Int { finished.filter { $0.key.state == .succeeded }.values.reduce(0, +) }
}
