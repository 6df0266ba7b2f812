import Hummingbird

/// Runs the application `make` builds (given the callback that receives the bound port) for the
/// duration of `body`, which gets the port; the application stops afterwards. Build it on port 0
/// for any free one.
public func withServingApplication<App: ApplicationProtocol, T: Sendable>(
    _ make: (@escaping @Sendable (Int) async -> Void) throws -> App,
    _ body: (Int) async throws -> T
) async throws -> T {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let application = try make { continuation.yield($0) }
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await application.run()
        }
        defer { group.cancelAll() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await reportingStall("starting a server", { await iterator.next() }) else {
            try await group.waitForAll()
            throw CancellationError()
        }
        let result = try await body(port)
        group.cancelAll()
        try await reportingStall("stopping the server on port \(port)") { try await group.waitForAll() }
        return result
    }
}
