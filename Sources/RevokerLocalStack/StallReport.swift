import Foundation

/// Runs `body`; if it is still running after `limit`, says so once on standard error, naming
/// `what`. A test run that hangs then tells where it waits instead of going silent.
@discardableResult
public func reportingStall<T>(
    _ what: String,
    after limit: Duration = .seconds(90),
    _ body: () async throws -> T
) async rethrows -> T {
    let started = ContinuousClock.now
    let watch = Task {
        try await Task.sleep(for: limit)
        FileHandle.standardError.write(Data("stall: still waiting after \(limit): \(what)\n".utf8))
    }
    defer {
        watch.cancel()
        let took = ContinuousClock.now - started
        if took > limit {
            FileHandle.standardError.write(Data("stall: ended after \(took): \(what)\n".utf8))
        }
    }
    return try await body()
}
