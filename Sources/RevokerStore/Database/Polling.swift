import Foundation

/// Reads `value` again, at growing intervals up to a tenth of a second, until `done` holds
/// or `wait` runs out (or it is gone).
func polling<T>(
    _ value: T,
    within wait: Duration,
    until done: (T) -> Bool,
    read: () async throws -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now + wait
    var pause = Duration.milliseconds(10)
    var current = value
    while !done(current), clock.now < deadline {
        try await Task.sleep(for: min(pause, deadline - clock.now))
        pause = min(pause * 2, .milliseconds(100))
        guard let read = try await read() else { break }
        current = read
    }
    return current
}
