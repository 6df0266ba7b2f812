import Foundation

/// Counts for metrics and health.
public struct QueueStatistics: Sendable, Hashable {
    /// Requests by state.
    public var byState: [RevocationState: Int]
    /// Final requests by (state, outcome).
    public var byOutcome: [Outcome: Int]
    /// Age of the oldest due pending request (zero when none is due).
    public var oldestDueAge: Duration
    /// Number of paused apps.
    public var pausedApps: Int
    /// Credentials waiting in the SQL intake (plaintext at rest until sealed).
    public var unsealedIntake: Int

    /// A (state, outcome) pair.
    public struct Outcome: Sendable, Hashable {
        /// Final state.
        public var state: RevocationState
        /// Outcome.
        public var outcome: RevocationOutcome

        /// Creates a pair.
        public init(state: RevocationState, outcome: RevocationOutcome) {
            self.state = state
            self.outcome = outcome
        }
    }
}
