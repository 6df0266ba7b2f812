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
    /// Grants in custody by provider and state.
    public var grants: [GrantCount: Int] = [:]
    /// Account deletions still pending.
    public var pendingDeletions = 0
    /// Writes acknowledged before a failover and missing after it (`write_lost` rows), last 24 hours.
    public var writesLost = 0

    /// A (provider, grant state) pair.
    public struct GrantCount: Sendable, Hashable {
        public var provider: String
        public var state: GrantState

        public init(provider: String, state: GrantState) {
            self.provider = provider
            self.state = state
        }
    }

    /// The number of grants of `provider` (every provider when nil) in `state`.
    public func grants(_ state: GrantState, provider: String? = nil) -> Int {
        grants.filter { $0.key.state == state && (provider == nil || $0.key.provider == provider) }.values.reduce(0, +)
    }

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
