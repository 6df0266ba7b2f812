/// An operation gave up after its time limit.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var description: String { "timed out" }
}

/// Runs `body`, cancelling it and throwing ``DeadlineExceeded`` after `limit`.
///
/// The worker puts every database call under one: a pool request queued while the server was
/// down must not wait forever and hold a concurrency slot.
public func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw DeadlineExceeded() }
        return first
    }
}
