/// A condition a test waited for in vain: it never held before the hang guard ran out.
public struct WaitedInVain: Error, CustomStringConvertible {
    /// What was waited for.
    public var what: String
    /// The hang guard.
    public var timeout: Duration
    public var description: String { "waited \(timeout) in vain: \(what)" }

    public init(what: String, timeout: Duration) {
        self.what = what
        self.timeout = timeout
    }
}

/// The tests' one way to wait: polls `condition` every `interval` until it holds.
///
/// `timeout` only guards against a hang, and is generous on purpose: tests assert what happened,
/// never how fast. `what` is read when the wait fails, so it may describe the state then. An
/// error thrown by `condition` ends the wait at once (say, the process waited on has died).
public func eventually(
    _ what: @autoclosure () -> String,
    timeout: Duration = .seconds(120),
    every interval: Duration = .milliseconds(50),
    _ condition: () async throws -> Bool
) async throws {
    _ = try await eventuallyValue(what(), timeout: timeout, every: interval) { try await condition() ? true : nil }
}

/// Polls `value` every `interval` until it returns something, and returns that: ``eventually(_:timeout:every:_:)``
/// for a test that needs what it waited for.
public func eventuallyValue<Value>(
    _ what: @autoclosure () -> String,
    timeout: Duration = .seconds(120),
    every interval: Duration = .milliseconds(50),
    _ value: () async throws -> Value?
) async throws -> Value {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await value() { return value }
        guard ContinuousClock.now < deadline else { throw WaitedInVain(what: what(), timeout: timeout) }
        try await Task.sleep(for: interval)
    }
}

/// Thrown by a wait's condition when what it waits for can no longer happen (the process
/// that was to do it has ended, say): the wait ends at once, saying why.
public struct CannotHappen: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }

    public init(_ reason: String) {
        self.reason = reason
    }
}
