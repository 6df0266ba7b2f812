import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Synchronization
import Testing

@testable import RevokerApp

/// The watch looks for lost writes when, and only when, the database's timeline changes: a
/// failover that lost a write records it once; one that lost nothing records nothing.
@Suite("Lost-write watch")
struct LostWriteWatchTests {
    static let logger = Logger(label: "test")

    @Test func aTimelineChangeFindsTheWritesItLostOnce() async throws {
        try await RevokerTestStack.with(apps: [.apple: ["com.example.app"]]) { stack in
            let queue = RevocationQueue(client: stack.database.client, sealer: stack.configuration.sealer, logger: Self.logger)
            let timeline = Mutex<UInt32?>(7)
            var watch = LostWriteWatch(queue: queue, actor: "revoker", logger: Self.logger)
            watch.timeline = { timeline.withLock { $0 } }
            func lostRows() async throws -> Int {
                try await queue.statistics().writesLost
            }

            let kept = try await queue.enqueue(
                NewRevocation(clientID: "com.example.app", externalReference: "kept", credential: Credential(kind: .refreshToken, secret: "r.kept")),
                actor: "t"
            ).request
            let gone = AcknowledgedWrite(.request, id: UUID(), clientID: "com.example.app", reference: "gone")
            queue.acknowledged.record(gone)

            var state = LostWriteWatch.State()
            await watch.check(&state)
            #expect(state.checked == 7, "the first reading is where it starts")
            await watch.check(&state)
            timeline.withLock { $0 = nil }
            await watch.check(&state)
            #expect(try await lostRows() == 0, "no change, no look: a standby's answer is no reading")

            timeline.withLock { $0 = 8 }
            await watch.check(&state)
            #expect(try await lostRows() == 1)
            #expect(state.checked == 8 && state.unchecked == nil)
            #expect(queue.acknowledged.kept().writes.map(\.id) == [kept.id.uuidString.lowercased()], "recorded once, then forgotten")

            await watch.check(&state)
            timeline.withLock { $0 = 9 }
            await watch.check(&state)
            #expect(try await lostRows() == 1, "a failover that lost nothing records nothing")
            #expect(state.checked == 9)
        }
    }

    @Test func theTimelineIsReadFromAPrimary() async throws {
        try await ScratchDatabase.withScratchDatabase(.migrated) { db in
            let queue = RevocationQueue(
                client: db.client,
                sealer: try CredentialSealer(keyring: .init(parsing: "a=" + Data(repeating: 1, count: 32).base64EncodedString(), currentKeyID: nil)),
                logger: Self.logger
            )
            let timeline = try #require(try await queue.databaseTimeline())
            #expect(timeline >= 1)
        }
    }
}
