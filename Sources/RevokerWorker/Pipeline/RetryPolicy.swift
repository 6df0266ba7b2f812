import RevokerProvider

/// When to try a transient failure again: capped exponential backoff with full jitter,
/// never sooner than Apple's `Retry-After`.
public struct RetryPolicy: Sendable, Equatable {
    /// The ceiling of the first delay; it doubles per attempt.
    public var base: Duration
    /// The largest ceiling.
    public var cap: Duration

    public init(base: Duration, cap: Duration) {
        self.base = base
        self.cap = max(cap, base)
    }

    /// The delay after failed attempt number `attempt` (1-based).
    public func delay(afterAttempt attempt: Int, retryAfter: Duration?, using generator: inout some RandomNumberGenerator) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(cap, base * (1 << exponent))
        let jittered = Duration.nanoseconds(Int64.random(in: 0...ceiling.nanoseconds, using: &generator))
        return max(jittered, retryAfter ?? .zero)
    }

    /// The delay after failed attempt number `attempt`, with the system's randomness.
    public func delay(afterAttempt attempt: Int, retryAfter: Duration?) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterAttempt: attempt, retryAfter: retryAfter, using: &generator)
    }
}
