import Synchronization

/// Lets concurrent callers share one statement ("group commit"): a caller that finds fewer than
/// `maxRunning` statements in flight runs one for itself and everything waiting; callers that
/// arrive meanwhile wait for the next. Idle, a call runs at once; busy, one round trip and one
/// commit serve up to `maxBatch` calls.
final class GroupCommit<Item: Sendable>: Sendable {
    typealias Execute = @Sendable ([Item]) async throws -> [Bool]

    private enum Turn: Sendable {
        case done(Bool)
        case lead
    }

    private struct State {
        var waiting: [(item: Item, continuation: CheckedContinuation<Turn, any Error>)] = []
        var running = 0
    }

    private let state = Mutex(State())
    private let maxBatch: Int
    private let maxRunning: Int
    private let timeout: Duration

    /// `timeout` bounds one statement: a statement that never answers (seen after a database
    /// restart) must not hold its place in `maxRunning` for ever, or every later call waits.
    init(maxBatch: Int = 256, maxRunning: Int = 2, timeout: Duration = .seconds(5)) {
        self.maxBatch = maxBatch
        self.maxRunning = maxRunning
        self.timeout = timeout
    }

    /// Runs `item` through `execute`, alone or together with concurrent submissions; returns
    /// what `execute` answered for it.
    func submit(_ item: Item, _ execute: @escaping Execute) async throws -> Bool {
        let turn = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Turn, any Error>) in
            let lead = state.withLock { state in
                if state.running < maxRunning {
                    state.running += 1
                    return true
                }
                state.waiting.append((item, continuation))
                return false
            }
            if lead { continuation.resume(returning: .lead) }
        }
        switch turn {
        case .done(let applied): return applied
        case .lead: return try await lead(item, execute)
        }
    }

    private func lead(_ own: Item, _ execute: @escaping Execute) async throws -> Bool {
        let others = state.withLock { state in
            let count = min(state.waiting.count, maxBatch - 1)
            defer { state.waiting.removeFirst(count) }
            return Array(state.waiting.prefix(count))
        }
        let outcome: Result<[Bool], any Error>
        do {
            let batch = [own] + others.map(\.item)
            let applied = try await withDeadline(timeout) { try await execute(batch) }
            outcome =
                applied.count == others.count + 1
                ? .success(applied) : .failure(RevokerStoreError(.unexpectedData, "a batched statement answered for the wrong number of requests"))
        } catch {
            outcome = .failure(error)
        }
        // The first waiter leads the next statement, carrying its own item.
        let next = state.withLock { state -> CheckedContinuation<Turn, any Error>? in
            guard !state.waiting.isEmpty else {
                state.running -= 1
                return nil
            }
            return state.waiting.removeFirst().continuation
        }
        next?.resume(returning: .lead)
        switch outcome {
        case .success(let applied):
            for (index, other) in others.enumerated() { other.continuation.resume(returning: .done(applied[index + 1])) }
            return applied[0]
        case .failure(let error):
            for other in others { other.continuation.resume(throwing: error) }
            throw error
        }
    }
}
