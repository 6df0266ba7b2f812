/// What is left in the queue, whoever touched it: the end of a `drain` is judged by this, not
/// by what the draining process itself claimed.
public struct QueueRemainder: Sendable, Hashable {
    /// Requests not final yet (pending, due or not, or running).
    public var waiting: Int
    /// Of those, pending requests of paused apps.
    public var waitingForPausedApps: Int
    /// Apps paused.
    public var pausedApps: Int

    /// Creates a remainder.
    public init(waiting: Int, waitingForPausedApps: Int, pausedApps: Int) {
        self.waiting = waiting
        self.waitingForPausedApps = waitingForPausedApps
        self.pausedApps = pausedApps
    }

    /// Nothing waits and no app is paused.
    public var isEmpty: Bool { waiting == 0 && pausedApps == 0 }
}
