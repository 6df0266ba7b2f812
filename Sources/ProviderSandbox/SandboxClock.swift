import Foundation
import Hummingbird
import Synchronization

/// A sandbox's time: the real time plus an offset that only grows, so a test can age codes,
/// tokens and client secrets without waiting for them (`POST /sandbox/clock`).
package final class SandboxClock: Sendable {
    /// The furthest the clock runs ahead (a century), so times stay well inside the integer
    /// seconds and milliseconds that claims are written in.
    package static let maximumOffset: TimeInterval = 100 * 365 * 86_400
    private let offset = Mutex<TimeInterval>(0)

    package init() {}

    /// The time the sandbox judges by: expiry of codes and secrets, `iat` and `exp` of what it
    /// signs, the times of recorded calls.
    package var now: Date { Date().addingTimeInterval(offset.withLock { $0 }) }

    /// Moves the clock `seconds` forward and returns the new time. It never goes back (what
    /// expired stays expired), so a negative or NaN `seconds` moves nothing.
    @discardableResult
    package func advance(by seconds: TimeInterval) -> Date {
        let offset = self.offset.withLock { offset in
            if seconds > 0 { offset = min(offset + seconds, Self.maximumOffset) }
            return offset
        }
        return Date().addingTimeInterval(offset)
    }

    /// Adds `POST clock` to a sandbox's admin routes: ``SandboxAdmin/AdvanceClock`` in,
    /// ``SandboxAdmin/ClockTime`` out.
    package func addRoute(to admin: RouterGroup<SandboxRequestContext>) {
        admin.post("clock") { request, context in
            let body = try await request.decode(as: SandboxAdmin.AdvanceClock.self, context: context)
            if let problem = body.problem { throw HTTPError(.badRequest, message: problem) }
            return SandboxJSON.response(SandboxAdmin.ClockTime(now: self.advance(by: body.advanceSeconds).timeIntervalSince1970))
        }
    }
}
