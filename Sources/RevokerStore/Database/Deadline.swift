import Synchronization

/// An operation gave up after its time limit.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var description: String { "timed out" }
}

/// Runs `body`, cancelling it and throwing ``DeadlineExceeded`` after `limit`.
///
/// The worker puts every database call under one: a pool request queued while the server was
/// down must not wait forever and hold a concurrency slot. The caller gets its answer at the
/// deadline even when `body` does not heed cancellation (a task group would wait for it): the
/// body is cancelled and left to end on its own.
public func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let race = DeadlineRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.start(continuation, limit: limit, body: body)
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The body, the timer and the caller's cancellation race; the first to finish answers.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var outcome: Result<T, any Error>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>, limit: Duration, body: @escaping @Sendable () async throws -> T) {
        let work = Task {
            do {
                finish(.success(try await body()))
            } catch {
                finish(.failure(error))
            }
        }
        let timer = Task {
            do {
                try await Task.sleep(for: limit)
                finish(.failure(DeadlineExceeded()))
            } catch {
                // Cancelled: something else answered.
            }
        }
        // The body may have answered, or the caller been cancelled, before this point.
        let early = state.withLock { state -> Result<T, any Error>? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            state.tasks = [work, timer]
            return nil
        }
        if let early {
            work.cancel()
            timer.cancel()
            continuation.resume(with: early)
        }
    }

    func finish(_ outcome: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard state.outcome == nil else { return (nil, []) }
            state.outcome = outcome
            defer {
                state.continuation = nil
                state.tasks = []
            }
            return (state.continuation, state.tasks)
        }
        for task in tasks { task.cancel() }
        continuation?.resume(with: outcome)
    }
}
