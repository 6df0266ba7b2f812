/// A condition a test waited for in vain.
public struct WaitedInVain: Error, CustomStringConvertible {
    /// What was waited for.
    public var what: String
    /// How long.
    public var limit: Duration
    public var description: String { "waited \(limit) in vain: \(what)" }

    public init(what: String, limit: Duration) {
        self.what = what
        self.limit = limit
    }
}

/// Polls `condition` until it holds. `limit` only guards against a hang (it is generous on
/// purpose): tests assert what happened, not how fast.
public func waitUntil(
    _ what: String,
    limit: Duration = .seconds(120),
    every interval: Duration = .milliseconds(50),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw WaitedInVain(what: what, limit: limit) }
        try await Task.sleep(for: interval)
    }
}
