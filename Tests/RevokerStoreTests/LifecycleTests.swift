import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Synchronization
import Testing

@Suite("Queue lifecycle")
struct LifecycleTests {
    @Test func sqlAndSwiftPathsAgreeOnReplays() async throws {
        try await Fixtures.withQueue { db, queue in
            let rows = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'sql-first', 'refresh_token', 'tok-a-1')"
            ).collect()
            let sqlID = try #require(try rows.first?.decode(UUID.self))
            let replay = try await queue.enqueue(Fixtures.new("sql-first", secret: "tok-a-1"), actor: "t")
            #expect(replay == .existing(try #require(try await queue.request(id: sqlID))))
            await #expect(throws: RevokerStoreError.self) {
                try await queue.enqueue(Fixtures.new("sql-first", secret: "tok-a-2"), actor: "t")
            }

            let swiftID = try await queue.enqueue(Fixtures.new("swift-first", secret: "tok-3"), actor: "t").request.id
            let sqlReplay = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'swift-first', 'refresh_token', 'tok-3')"
            ).collect()
            #expect(try sqlReplay.first?.decode(UUID.self) == swiftID)
            let error = await #expect(throws: PSQLError.self, "a conflicting SQL replay is refused") {
                _ = try await db.client.query("SELECT revoker.enqueue_revocation('com.example.app', 'swift-first', 'access_token', 'tok-3')")
                    .collect()
            }
            #expect(error?.serverInfo?[.sqlState] == "RV409")
            let count = try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests").collect()
            #expect(try count.first?.decode(Int.self) == 2)
        }
    }

    @Test func retryReleaseAndRequeueAfterConfigurationFailure() async throws {
        try await Fixtures.withQueue { db, queue in
            let id = try await queue.enqueue(Fixtures.new("user-1", secret: "tok-1"), actor: "t").request.id
            var claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(claimed.request.attempts == 1)
            #expect(try await queue.retry(claimed.lease, after: .seconds(3600), error: ErrorDetail(code: "invalid_client"), countsAttempt: false))
            var request = try #require(try await queue.request(id: id))
            #expect(request.state == .pending)
            #expect(request.attempts == 0)
            #expect(request.lastErrorCode == "invalid_client")
            #expect(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").isEmpty)
            #expect(try await queue.retry(claimed.lease, after: .zero, error: nil) == false)

            try await db.client.query("UPDATE revoker.revocation_requests SET run_after = now()")
            claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(try await queue.extendLease(claimed.lease, by: .seconds(120)))
            #expect(try await queue.release(claimed.lease))
            request = try #require(try await queue.request(id: id))
            #expect(request.state == .pending && request.attempts == 0)

            claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(
                try await queue.finish(
                    claimed.lease,
                    state: .failed,
                    outcome: .clientMisconfigured,
                    error: ErrorDetail(code: "invalid_client")
                )
            )
            #expect(try await queue.request(id: id)?.hasCredential == true)
            #expect(try await queue.requeueConfigurationFailures(clientID: "com.example.other", actor: "ops") == 0)
            #expect(try await queue.requeueConfigurationFailures(clientID: "com.example.app", actor: "ops") == 1)
            #expect(try await queue.requeueConfigurationFailures(clientID: "com.example.app", actor: "ops") == 0)
            #expect(try await queue.request(id: id)?.hasCredential == false)
            let fresh = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(fresh.request.requeuedFrom == id)
            #expect(fresh.request.attempts == 1)
            #expect(fresh.credential.secret == "tok-1")
            let events = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: id))
            #expect(
                events.records.map(\.event) == [
                    "enqueued", "claimed", "retry_scheduled", "claimed", "released", "claimed", "failed", "requeued", "credential_erased",
                ]
            )
            await #expect(throws: RevokerStoreError.self) {
                try await queue.finish(fresh.lease, state: .failed, outcome: .revoked)
            }
        }
    }

    @Test func wakeUpsFireOnInsert() async throws {
        try await Fixtures.withQueue { db, queue in
            let heard = Heard()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await queue.withWakeUps { wakeUps in
                        for try await _ in wakeUps {
                            heard.value.withLock { $0 = true }
                            return
                        }
                    }
                }
                // Keep inserting until the listener has started and hears one.
                var index = 0
                try await eventually("the listener hears an insert", every: .milliseconds(100)) {
                    if heard.value.withLock({ $0 }) { return true }
                    _ = try await queue.enqueue(Fixtures.new("wake-\(index)"), actor: "t")
                    index += 1
                    return false
                }
                group.cancelAll()
            }
        }
    }

    @Test func statisticsCountStatesAndOutcomes() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("a"), actor: "t")
            _ = try await queue.enqueue(Fixtures.new("b"), actor: "t")
            let claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(try await queue.finish(claimed.lease, state: .succeeded, outcome: .alreadyInvalid))
            let statistics = try await queue.statistics()
            #expect(statistics.byState[.pending] == 1)
            #expect(statistics.byState[.succeeded] == 1)
            #expect(statistics.byOutcome[QueueStatistics.Outcome(state: .succeeded, outcome: .alreadyInvalid)] == 1)
            #expect(statistics.pausedApps == 0)
            #expect(try await queue.list(RevocationFilter(state: .pending)).map(\.externalReference) == ["b"])
        }
    }
}

/// Whether the listener has heard an insert.
private final class Heard: Sendable {
    let value = Mutex(false)
}
