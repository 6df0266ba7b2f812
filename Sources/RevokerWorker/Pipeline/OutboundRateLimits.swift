import Synchronization

/// The outbound rate limits of one worker process: calls per second to providers, per app and
/// in all, each divided among the live worker processes (`revoker.workers`), so that together
/// they keep to the configured rate. A provider's 429 pauses every call of that app for its
/// `Retry-After`, not just the one request.
///
/// Calls are spaced evenly (one every `1 / rate` seconds, no burst): a backlog after an incident
/// goes out at the configured rate from its first call.
public final class OutboundRateLimits: Sendable {
    /// The longest a claimed request waits for a call slot; one that would wait longer goes back
    /// to the queue until its slot, so that one app's backlog does not hold the worker's
    /// concurrency from the others.
    public static let longestWait: Duration = .seconds(5)
    /// How long an app pauses after a 429 that names no `Retry-After`.
    public static let defaultThrottlePause: Duration = .seconds(1)
    /// Seconds counted for the observed rates: the last nine whole ones, and the current one filling.
    static let window = 10

    fileprivate struct Slot {
        /// The configured rate in all processes, and the earliest time of this process's next call.
        var rate: Double?
        var next: ContinuousClock.Instant
        /// Calls admitted per second of the last ``window`` seconds, for the observed rate.
        var counts = [Int](repeating: 0, count: OutboundRateLimits.window)
        var countedSecond = 0
        /// The second of the first call, so that a young process's rate is not spread over seconds it did not run.
        var firstSecond: Int?
        /// 429s seen, so that a call that waited through one knows to take a new slot.
        var pauses = 0
    }

    private struct State {
        var apps: [String: Slot]
        var global: Slot
        var workers = 1
    }

    private let state: Mutex<State>
    private let origin = ContinuousClock.now

    /// - Parameters:
    ///   - perApp: calls per second by client_id, for all worker processes together.
    ///   - global: calls per second to all providers, for all worker processes together.
    public init(perApp: [String: Double] = [:], global: Double? = nil) {
        let now = ContinuousClock.now
        state = Mutex(
            State(apps: perApp.mapValues { Slot(rate: $0, next: now) }, global: Slot(rate: global, next: now))
        )
    }

    /// The configured rates by client_id (all processes together); `nil` for no limit.
    public var configured: (perApp: [String: Double], global: Double?) {
        state.withLock { state in (state.apps.compactMapValues(\.rate), state.global.rate) }
    }

    /// Shares the limits among `count` live worker processes.
    public func share(among count: Int) {
        state.withLock { $0.workers = max(1, count) }
    }

    /// A call slot booked for an app: when it comes, and the app's 429 count at booking, so that
    /// a pause that began meanwhile sends the call back for a slot after it.
    public struct Ticket: Sendable {
        public let at: ContinuousClock.Instant
        let pauses: Int
        let spacing: (app: Duration?, global: Duration?)

        /// How long from now until the slot.
        public var wait: Duration { max(.zero, at - ContinuousClock.now) }
    }

    /// Books the next slot of `clientID` under its limit, the global one and any pause after a 429.
    public func book(_ clientID: String) -> Ticket {
        let now = ContinuousClock.now
        return state.withLock { state in
            var slot = state.apps[clientID] ?? Slot(rate: nil, next: now)
            // Without a rate a slot's `next` never moves past its last pause, so it delays only until then.
            let at = max(now, state.global.next, slot.next)
            let share = Double(state.workers)
            let spacing = (app: slot.rate.map { Duration.seconds(share / $0) }, global: state.global.rate.map { Duration.seconds(share / $0) })
            if let gap = spacing.global { state.global.next = at + gap }
            if let gap = spacing.app { slot.next = at + gap }
            state.apps[clientID] = slot
            return Ticket(at: at, pauses: slot.pauses, spacing: spacing)
        }
    }

    /// Gives back a slot that will not be used: the next booking takes it when it was the last
    /// one booked (otherwise it stays a gap, which never makes the rate higher).
    public func cancel(_ ticket: Ticket, of clientID: String) {
        state.withLock { state in
            if let gap = ticket.spacing.global, state.global.next == ticket.at + gap { state.global.next = ticket.at }
            if let gap = ticket.spacing.app, state.apps[clientID]?.next == ticket.at + gap { state.apps[clientID]?.next = ticket.at }
        }
    }

    /// Waits for the slot of `ticket` (or the next one booked now), counting the call.
    public func admit(_ clientID: String, ticket: Ticket? = nil) async throws {
        var ticket = ticket ?? book(clientID)
        while true {
            if ticket.at > ContinuousClock.now { try await Task.sleep(until: ticket.at, clock: .continuous) }
            let current = state.withLock { state -> Bool in
                guard state.apps[clientID]?.pauses == ticket.pauses else { return false }
                state.apps[clientID]?.count(atSecond: Int((ContinuousClock.now - origin).components.seconds))
                return true
            }
            if current { return }
            ticket = book(clientID)
        }
    }

    /// The provider answered 429 for `clientID`: no call of the app goes out before `retryAfter`
    /// has passed, and the calls waiting for a slot take new ones after it.
    public func throttled(_ clientID: String, retryAfter: Duration?) {
        let until = ContinuousClock.now + (retryAfter ?? Self.defaultThrottlePause)
        state.withLock { state in
            var slot = state.apps[clientID] ?? Slot(rate: nil, next: until)
            slot.next = max(slot.next, until)
            slot.pauses += 1
            state.apps[clientID] = slot
        }
    }

    /// Calls per second this process made to each app over the last nine whole seconds.
    public func observed() -> [String: Double] {
        let second = Int((ContinuousClock.now - origin).components.seconds)
        return state.withLock { state in
            state.apps.compactMapValues { slot in
                let seconds = min(Self.window - 1, second - (slot.firstSecond ?? second))
                let recent = slot.recent(atSecond: second)
                return recent > 0 && seconds > 0 ? Double(recent) / Double(seconds) : nil
            }
        }
    }
}

extension OutboundRateLimits.Slot {
    /// Counts a call in the bucket of `second`, clearing the buckets of the seconds skipped since the last.
    fileprivate mutating func count(atSecond second: Int) {
        if firstSecond == nil { firstSecond = second }
        clear(upTo: second)
        counts[second % OutboundRateLimits.window] += 1
    }

    /// Calls in the whole seconds of the window before `second`, which is still filling.
    fileprivate func recent(atSecond second: Int) -> Int {
        var copy = self
        copy.clear(upTo: second)
        return copy.counts.indices.filter { $0 != second % OutboundRateLimits.window }.reduce(0) { $0 + copy.counts[$1] }
    }

    private mutating func clear(upTo second: Int) {
        guard second > countedSecond else { return }
        for skipped in (countedSecond + 1)...min(second, countedSecond + OutboundRateLimits.window) {
            counts[skipped % OutboundRateLimits.window] = 0
        }
        countedSecond = second
    }
}
