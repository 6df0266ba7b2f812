import Synchronization
import Testing

@testable import RevokerStore

/// A call that never answers and ignores cancellation, as a database call was seen to after a
/// restart; `release()` lets it end so that the test leaves nothing behind.
final class Stuck: Sendable {
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let released = Mutex(false)

    var ended: Bool { released.withLock { $0 } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = released.withLock { $0 }
            if now { continuation.resume() } else { waiting.withLock { $0.append(continuation) } }
        }
    }

    func release() {
        released.withLock { $0 = true }
        for continuation in waiting.withLock({ list in
            defer { list = [] }
            return list
        }) { continuation.resume() }
    }
}

@Suite("Deadlines and shared statements")
struct DeadlineTests {
    @Test func theDeadlineAnswersWhileTheBodyIgnoresCancellation() async throws {
        let stuck = Stuck()
        await #expect(throws: DeadlineExceeded.self) {
            try await withDeadline(.milliseconds(100)) { await stuck.wait() }
        }
        #expect(!stuck.ended, "the caller had its answer before the body ended")
        stuck.release()
    }

    @Test func aStatementThatNeverAnswersDoesNotHoldItsPlace() async throws {
        let stuck = Stuck()
        let commits = GroupCommit<Int>(maxRunning: 1, timeout: .milliseconds(100))
        // The only running place is taken by a statement that never answers; it fails at its timeout.
        await #expect(throws: DeadlineExceeded.self) {
            _ = try await commits.submit(1) { items in
                await stuck.wait()
                return items.map { _ in true }
            }
        }
        // A later call gets the place and runs.
        let applied = try await commits.submit(2) { items in items.map { $0 == 2 } }
        #expect(applied)
        stuck.release()
    }
}
