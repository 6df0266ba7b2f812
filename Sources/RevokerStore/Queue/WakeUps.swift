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
            try await Self.listen(on: connection, logger: self.logger, body)
        }
    }

    /// How often a listening connection proves that the server still answers: a connection to a
    /// server that vanished without closing it (a failed-over machine, a dropped route) would
    /// otherwise wait for notifications forever.
    static let heartbeatInterval: Duration = .seconds(5)
    /// How long the proof may take before the connection counts as dead.
    static let heartbeatTimeout: Duration = .seconds(10)

    /// Listens for wake-ups on `connection` for the duration of `body`, sending a heartbeat every
    /// ``heartbeatInterval``; a heartbeat unanswered within ``heartbeatTimeout`` closes the
    /// connection, which ends `body` with an error.
    static func listen<Result: Sendable>(
        on connection: PostgresConnection,
        logger: Logger,
        _ body: @Sendable (WakeUps) async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: heartbeatInterval)
                    do {
                        _ = try await withDeadline(heartbeatTimeout) { try await connection.query("SELECT 1", logger: logger).collect() }
                    } catch {
                        if Task.isCancelled { return }
                        logger.warning("A listening database connection stopped answering; closing it")
                        try? await connection.close().get()
                        throw error
                    }
                }
            }
            defer { group.cancelAll() }
            return try await connection.listen(on: wakeUpChannel) { notifications in try await body(WakeUps(base: notifications)) }
        }
    }
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
