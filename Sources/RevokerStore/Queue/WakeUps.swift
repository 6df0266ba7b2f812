import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Listens for wake-ups (new requests inserted) for the duration of `body`, on a connection
    /// of its own. Notifications are hints: poll as well, since a notification sent while not
    /// listening is lost.
    public func withWakeUps<Result: Sendable>(
        _ body: @Sendable (WakeUps) async throws -> Result
    ) async throws -> Result {
        try await self.client.withConnection { connection in
            try await self.listen(on: connection, body)
        }
    }

    /// Listens for wake-ups on `connection` for the duration of `body`, sending a heartbeat
    /// (``listenHeartbeat``); a heartbeat unanswered in time closes the connection, which ends
    /// `body` with an error.
    func listen<Result: Sendable>(
        on connection: PostgresConnection,
        _ body: @Sendable (WakeUps) async throws -> Result
    ) async throws -> Result {
        let (heartbeat, logger) = (listenHeartbeat, logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: heartbeat.interval)
                    do {
                        _ = try await withDeadline(heartbeat.timeout) { try await connection.query("SELECT 1", logger: logger).collect() }
                    } catch {
                        if Task.isCancelled { return }
                        logger.warning("A listening database connection stopped answering; closing it")
                        try? await connection.close().get()
                        throw error
                    }
                }
            }
            defer { group.cancelAll() }
            return try await connection.listen(on: Self.wakeUpChannel) { notifications in try await body(WakeUps(base: notifications)) }
        }
    }
}

/// How a connection that listens for wake-ups proves that the server still answers: a
/// connection to a server that vanished without closing it (a failed-over machine, a dropped
/// route) would otherwise wait for notifications forever.
public struct ListenHeartbeat: Sendable, Hashable {
    /// How often it sends `SELECT 1`.
    public var interval: Duration
    /// How long the answer may take before the connection counts as dead and is closed.
    public var timeout: Duration

    public init(interval: Duration, timeout: Duration) {
        self.interval = interval
        self.timeout = timeout
    }

    /// Every 5 s, dead after 10 s without an answer.
    public static let standard = ListenHeartbeat(interval: .seconds(5), timeout: .seconds(10))
}

/// Wake-up hints from the database: an element each time new requests were inserted.
public struct WakeUps: AsyncSequence, Sendable {
    public typealias Element = Void
    let base: PostgresNotificationSequence

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.base.makeAsyncIterator())
    }

    /// The iterator.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: PostgresNotificationSequence.AsyncIterator

        public mutating func next() async throws -> Void? {
            try await self.base.next().map { _ in () }
        }
    }
}
