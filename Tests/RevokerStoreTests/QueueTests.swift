import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Queue")
struct QueueTests {
    @Test func idempotentAndConflictingEnqueue() async throws {
        try await Fixtures.withQueue { db, queue in
            let first = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            guard case .created(let created) = first else {
                Issue.record("expected a new request, got \(first)")
                return
            }
            let again = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            #expect(again == .existing(created))
            await #expect(throws: RevokerStoreError.self) {
                try await queue.enqueue(Fixtures.new("user-1", secret: "other"), actor: "test")
            }
            let error = await #expect(throws: RevokerStoreError.self) {
                try await queue.enqueue(Fixtures.new("user-1", kind: .accessToken), actor: "test")
            }
            #expect(error?.code == .conflict)
        }
    }

    @Test func concurrentReplaysCreateOneRow() async throws {
        try await Fixtures.withQueue { db, queue in
            let ids = try await withThrowingTaskGroup(of: UUID.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await queue.enqueue(Fixtures.new("user-42"), actor: "test").request.id }
                }
                var ids = Set<UUID>()
                for try await id in group { ids.insert(id) }
                return ids
            }
            #expect(ids.count == 1)
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests").collect()
            #expect(try rows.first?.decode(Int.self) == 1)
        }
    }

    @Test func sqlEnqueueFollowsTheTransactionAndIsSealedOnClaim() async throws {
        try await Fixtures.withQueue { db, queue in
            let rolledBack = try await db.client.withConnection { connection in
                try await connection.query("BEGIN", logger: Logger(label: "t"))
                let rows = try await connection.query(
                    "SELECT revoker.enqueue_revocation('com.example.app', 'gone', 'refresh_token', 'tok-gone')",
                    logger: Logger(label: "t")
                ).collect()
                try await connection.query("ROLLBACK", logger: Logger(label: "t"))
                return try rows.first?.decode(UUID.self)
            }
            #expect(rolledBack != nil)
            let id: UUID? = try await db.client.withTransaction(logger: Logger(label: "t")) { connection in
                let rows = try await connection.query(
                    "SELECT revoker.enqueue_revocation('com.example.app', 'kept', 'refresh_token', 'tok-kept', apple_user_id => '000123.abc')",
                    logger: Logger(label: "t")
                ).collect()
                return try rows.first?.decode(UUID.self)
            }
            let all = try await queue.list(RevocationFilter())
            #expect(all.map(\.externalReference) == ["kept"])
            let intake = try await db.client.query("SELECT count(*)::int FROM revoker.credential_intake").collect()
            #expect(try intake.first?.decode(Int.self) == 1)

            let claimed = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w1")
            #expect(claimed.count == 1)
            #expect(claimed.first?.request.id == id)
            #expect(claimed.first?.credential.secret == "tok-kept")
            let after = try await db.client.query(
                "SELECT (SELECT count(*)::int FROM revoker.credential_intake), (SELECT count(*)::int FROM revoker.revocation_requests WHERE sealed_credential IS NOT NULL)"
            ).collect()
            let (intakeCount, sealedCount) = try after.first?.decode((Int, Int).self) ?? (-1, -1)
            #expect(intakeCount == 0)
            #expect(sealedCount == 1)
            let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: id))
            #expect(audit.records.first?.event == "enqueued")
            #expect(audit.records.first?.actor == "sql:postgres")
        }
    }

    @Test func sealIntakeSealsPendingRows() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'ref-' || g, 'refresh_token', 'tok-' || g) FROM generate_series(1, 3) g"
            ).collect()
            #expect(try await queue.statistics().unsealedIntake == 3)
            #expect(try await queue.sealIntake() == 3)
            #expect(try await queue.statistics().unsealedIntake == 0)
            let claimed = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            #expect(Set(claimed.map(\.credential.secret)) == ["tok-1", "tok-2", "tok-3"])
        }
    }

    @Test func concurrentClaimersClaimEachRequestOnce() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'ref-' || g, 'refresh_token', 'tok-' || g) FROM generate_series(1, 5000) g"
            ).collect()
            let claims = try await withThrowingTaskGroup(of: [UUID].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var mine: [UUID] = []
                        while true {
                            let batch = try await queue.claim(batch: 50, lease: .seconds(300), owner: "w\(worker)")
                            if batch.isEmpty { return mine }
                            mine += batch.map(\.request.id)
                        }
                    }
                }
                var all: [UUID] = []
                for try await ids in group { all += ids }
                return all
            }
            #expect(claims.count == 5000)
            #expect(Set(claims).count == 5000)
            let rows = try await db.client.query(
                "SELECT count(*)::int FROM revoker.revocation_requests WHERE state = 'running' AND attempts = 1 AND fencing_token = 1"
            ).collect()
            #expect(try rows.first?.decode(Int.self) == 5000)
        }
    }

    @Test func codesFirstAndPausedAppsSkipped() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("old-refresh"), actor: "t")
            _ = try await queue.enqueue(Fixtures.new("paused", client: "com.example.paused"), actor: "t")
            try await Task.sleep(for: .milliseconds(10))
            _ = try await queue.enqueue(Fixtures.new("new-code", secret: "code", kind: .authorizationCode), actor: "t")
            try await queue.pauseApp(clientID: "com.example.paused", reason: ErrorDetail(code: "invalid_client"), probeAfter: .seconds(60))
            #expect(try await queue.pausedApps().map(\.clientID) == ["com.example.paused"])
            let claimed = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            #expect(claimed.map(\.request.externalReference) == ["new-code", "old-refresh"])
            #expect(try await queue.resumeApp(clientID: "com.example.paused"))
            let rest = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            #expect(rest.map(\.request.externalReference) == ["paused"])
        }
    }
}
