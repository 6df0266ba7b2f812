/// A clock read as the time elapsed since it was made: what caches and pauses measure. Any
/// `Clock` can stand behind it (the continuous clock in production, a manual one in tests, which
/// then move time instead of sleeping) without making every type that waits generic.
public struct ElapsedClock: Sendable {
    /// The time elapsed since the clock was made.
    public let now: @Sendable () -> Duration
    /// Returns once `now()` has reached `deadline` (at once if it has); throws if cancelled.
    public let sleep: @Sendable (_ deadline: Duration) async throws -> Void

    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleep = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
    }

    /// The continuous clock: monotonic, and it keeps counting while the machine sleeps.
    public static var continuous: ElapsedClock { ElapsedClock(ContinuousClock()) }
}
