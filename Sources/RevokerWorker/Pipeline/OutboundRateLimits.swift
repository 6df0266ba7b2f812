import Synchronization

/// The outbound rate limits of one worker process: calls per second to providers, per app and
/// in all, each divided among the live worker processes (`revoker.workers`), so that together
/// they keep to the configured rate. A provider's 429 pauses every call of that app for its
/// `Retry-After`, not just the one request.
///
/// Calls are spaced evenly (one every `1 / rate` seconds, no burst): a backlog after an incident
/// goes out at the configured rate from its first call.
public final class OutboundRateLimits: Sendable {
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

    /// The live worker processes sharing the limits (at least this one).
    public var workers: Int { state.withLock { $0.workers } }

    /// Shares the limits among `count` live worker processes.
    public func share(among count: Int) {
        state.withLock { $0.workers = max(1, count) }
    }

    /// Waits for the app's next slot under its limit, the global one and any pause after a 429.
    /// A pause that begins while a call waits sends it back for a slot after the pause.
    public func admit(_ clientID: String) async throws {
        while true {
            let now = ContinuousClock.now
            let (at, pauses) = state.withLock { state in
                var slot = state.apps[clientID] ?? Slot(rate: nil, next: now)
                // Without a rate a slot's `next` never moves past its last pause, so it delays only until then.
                let at = max(now, state.global.next, slot.next)
                let share = Double(state.workers)
                if let rate = state.global.rate { state.global.next = at + .seconds(share / rate) }
                if let rate = slot.rate { slot.next = at + .seconds(share / rate) }
                state.apps[clientID] = slot
                return (at, slot.pauses)
            }
            if at > now { try await Task.sleep(until: at, clock: .continuous) }
            let resumed = state.withLock { state -> Bool in
                guard state.apps[clientID]?.pauses == pauses else { return false }
                state.apps[clientID]?.count(atSecond: Int((ContinuousClock.now - origin).components.seconds))
                return true
            }
            if resumed { return }
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
