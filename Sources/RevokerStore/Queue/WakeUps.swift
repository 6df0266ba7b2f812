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
            try await connection.listen(on: Self.wakeUpChannel) { notifications in
                try await body(WakeUps(base: notifications))
            }
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
