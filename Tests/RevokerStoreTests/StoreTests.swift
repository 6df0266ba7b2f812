import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Migrations")
struct MigrationTests {
    @Test func appliesTwiceWithoutChange() async throws {
        try await ScratchDatabase.withScratchDatabase { (db: ScratchDatabase) async throws in
            let migrator = Migrator(client: db.client, logger: Logger(label: "test"))
            #expect(try await migrator.isCurrent() == false)
            #expect(try await migrator.migrate() == Migration.all.map(\.version))
            #expect(try await migrator.migrate() == [])
            #expect(try await migrator.isCurrent())
            #expect(try await migrator.pendingMigrations().isEmpty)
        }
    }

    @Test func concurrentMigratorsApplyOnce() async throws {
        try await ScratchDatabase.withScratchDatabase { (db: ScratchDatabase) async throws in
            let first = db.makeClient()
            let second = db.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await first.run() }
                group.addTask { await second.run() }
                async let a = Migrator(client: first, logger: Logger(label: "a")).migrate()
                async let b = Migrator(client: second, logger: Logger(label: "b")).migrate()
                let applied = try await a + b
                #expect(applied == Migration.all.map(\.version))
                group.cancelAll()
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.schema_migrations").collect()
            #expect(try rows.first?.decode(Int.self) == Migration.all.count)
        }
    }

    @Test func everyMigrationFileIsEmbedded() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.map { String($0.dropLast(4)) } == Migration.all.map(\.name))
        for (file, migration) in zip(files, Migration.all) {
            #expect(try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8) == migration.sql)
            #expect(Int(file.prefix(4)) == migration.version)
        }
    }

    @Test func refusesChangedChecksum() async throws {
        try await ScratchDatabase.withScratchDatabase { (db: ScratchDatabase) async throws in
            try await Migrator(client: db.client, logger: Logger(label: "t")).migrate()
            try await db.client.query("UPDATE revoker.schema_migrations SET checksum = 'x'")
            await #expect(throws: RevokerStoreError.self) {
                try await Migrator(client: db.client, logger: Logger(label: "t")).migrate()
            }
            #expect(try await Migrator(client: db.client, logger: Logger(label: "t")).isCurrent() == false)
        }
    }
}

@Suite("Queue")
struct QueueTests {
    @Test func idempotentAndConflictingEnqueue() async throws {
        try await Fixtures.withQueue { db, queue in
            let first = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            guard case .created(let created) = first else {
                Issue.record("expected created")
                return
            }
            let again = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            #expect(again == .existing(created))
            await #expect(throws: RevokerStoreError.self) {
                try await queue.enqueue(Fixtures.new("user-1", secret: "other"), actor: "test")
            }
            do {
                _ = try await queue.enqueue(Fixtures.new("user-1", kind: .accessToken), actor: "test")
                Issue.record("expected a conflict")
            } catch let error as RevokerStoreError {
                #expect(error.code == .conflict)
            }
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

    @Test func staleFenceChangesNothingAndExpiredLeaseIsRescued() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            let first = try #require(try await queue.claim(batch: 1, lease: .milliseconds(1), owner: "w1").first)
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await queue.rescueExpiredLeases() == 1)
            let second = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w2").first)
            #expect(second.lease.fencingToken == first.lease.fencingToken + 1)
            #expect(try await queue.finish(first.lease, state: .succeeded, outcome: .revoked) == false)
            #expect(try await queue.record(first.lease, events: [AuditEvent(.note, detail: "late")]) == false)
            let request = try #require(try await queue.request(id: first.request.id))
            #expect(request.state == .running)
            #expect(request.leaseOwner == "w2")
            #expect(request.hasCredential)
            let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: request.id))
            #expect(audit.records.map(\.event) == ["enqueued", "claimed", "rescued", "claimed"])
            #expect(try await queue.finish(second.lease, state: .succeeded, outcome: .revoked) == true)
        }
    }

    @Test func concurrentFinishesEachApplyOnceWithTheirEventsInOrder() async throws {
        try await Fixtures.withQueue { db, queue in
            let claimed = try await Fixtures.enqueueAndClaim(200, db: db, queue: queue)
            #expect(claimed.count == 200)
            let first = claimed[0].lease
            let stale = Lease(requestID: first.requestID, fencingToken: first.fencingToken - 1, owner: "w", expiresAt: first.expiresAt)
            #expect(try await queue.extendLeases(claimed.map(\.lease) + [stale], by: .seconds(120)) == 200, "every current lease, not the stale one")
            // Concurrent finishes share statements; each must still apply to its own row only, and a stale one to none.
            let applied = try await withThrowingTaskGroup(of: (UUID?, Bool).self) { group in
                group.addTask { (nil, try await queue.finish(stale, state: .succeeded, outcome: .revoked)) }
                for (index, item) in claimed.enumerated() {
                    group.addTask {
                        let outcome: RevocationOutcome = index % 2 == 0 ? .revoked : .alreadyInvalid
                        let events = [AuditEvent(.note, detail: "step \(index)")]
                        return (item.request.id, try await queue.finish(item.lease, state: .succeeded, outcome: outcome, events: events))
                    }
                }
                var applied: [(UUID?, Bool)] = []
                for try await result in group { applied.append(result) }
                return applied
            }
            #expect(applied.filter { $0.0 == nil }.map(\.1) == [false])
            #expect(applied.filter { $0.0 != nil && $0.1 }.count == 200)
            let rows = try await db.client.query(
                """
                SELECT count(*) FILTER (WHERE outcome = 'revoked')::int, count(*) FILTER (WHERE outcome = 'already_invalid')::int
                FROM revoker.revocation_requests WHERE state = 'succeeded' AND sealed_credential IS NULL AND lease_owner IS NULL
                """
            ).collect()
            let outcomes = try rows.first?.decode((Int, Int).self)
            #expect(outcomes?.0 == 100 && outcomes?.1 == 100)
            for index in [0, 1, 199] {
                let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: claimed[index].request.id))
                #expect(audit.records.suffix(3).map(\.event) == ["note", "succeeded", "credential_erased"])
                #expect(audit.records.suffix(3).first?.detail == "step \(index)")
                #expect(audit.records.suffix(3).allSatisfy { $0.actor == "w" && $0.attempt == 1 })
            }
        }
    }

    @Test func leaseExtensionsAndFinishesOverTheSameRowsNeverDeadlock() async throws {
        try await Fixtures.withQueue { db, queue in
            let claimed = try await Fixtures.enqueueAndClaim(300, db: db, queue: queue)
            #expect(claimed.count == 300)
            // A worker extends all its leases while its requests finish in another order: both lock
            // many of the same rows, so they must lock them in one order (PostgreSQL would abort one
            // of them as a deadlock otherwise).
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<15 { _ = try await queue.extendLeases(claimed.map(\.lease).shuffled(), by: .seconds(120)) }
                    }
                }
                for item in claimed.shuffled() {
                    group.addTask { _ = try await queue.finish(item.lease, state: .succeeded, outcome: .revoked) }
                }
                try await group.waitForAll()
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests WHERE state = 'succeeded'").collect()
            #expect(try rows.first?.decode(Int.self) == 300)
        }
    }

    @Test func finishErasesCredentialAndNeverLeaksIt() async throws {
        let storage = CapturingLogHandler.Storage()
        let logger = CapturingLogHandler.logger(storage: storage)
        let secret = "r.SUPER-SECRET-\(UUID().uuidString)"
        let code = "c.CODE-SECRET-\(UUID().uuidString)"
        try await Fixtures.withQueue(logger: logger) { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-9", secret: code, kind: .authorizationCode), actor: "test")
            let claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(claimed.credential.secret == code)
            #expect(!"\(claimed)".contains(code))
            #expect(!String(reflecting: claimed.credential).contains(code))
            #expect(
                try await queue.replaceCredential(
                    claimed.lease,
                    with: Credential(kind: .refreshToken, secret: secret),
                    events: [AuditEvent(.tokenExchanged, appleEndpoint: "/auth/token", httpStatus: 200, latency: .milliseconds(12))]
                )
            )
            #expect(
                try await queue.finish(
                    claimed.lease,
                    state: .succeeded,
                    outcome: .revoked,
                    events: [AuditEvent(.revoked, appleEndpoint: "/auth/revoke", httpStatus: 200)]
                )
            )
            let rows = try await db.client.query(
                "SELECT sealed_credential IS NULL AND credential_key_id IS NULL FROM revoker.revocation_requests"
            ).collect()
            #expect(try rows.first?.decode(Bool.self) == true)
            let hits = try await db.client.query(
                """
                SELECT count(*)::int FROM revoker.audit_events a
                WHERE strpos(a::text, \(secret)) > 0 OR strpos(a::text, \(code)) > 0
                """
            ).collect()
            #expect(try hits.first?.decode(Int.self) == 0)
            let events = try await AuditLog(client: db.client, logger: logger).query(AuditQuery(externalReference: "user-9"))
            #expect(events.records.map(\.event) == ["enqueued", "claimed", "token_exchanged", "revoked", "succeeded", "credential_erased"])
        }
        #expect(!storage.all.isEmpty)
        #expect(!storage.all.contains { $0.contains(secret) || $0.contains(code) })
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

    @Test func pruneKeepsAuditRows() async throws {
        try await Fixtures.withQueue { db, queue in
            let request = try await queue.enqueue(Fixtures.new("user-1"), actor: "t").request
            _ = try await queue.enqueue(Fixtures.new("user-2"), actor: "t")
            #expect(try await queue.cancel(id: request.id, actor: "ops") != .notFound)
            #expect(try await queue.cancel(id: UUID(), actor: "ops") == .notFound)
            #expect(try await queue.prune(finishedBefore: Date().addingTimeInterval(-3600)) == 0)
            #expect(try await queue.prune(finishedBefore: Date().addingTimeInterval(3600)) == 1)
            #expect(try await queue.request(id: request.id) == nil)
            let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: request.id))
            #expect(audit.records.map(\.event) == ["enqueued", "cancelled", "credential_erased"])
            #expect(try await queue.statistics().byState[.pending] == 1)
        }
    }

    @Test func auditTrailIsAppendOnly() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-1"), actor: "t")
            let owner = try await db.client.query(
                "SELECT current_user::text, (SELECT tableowner::text FROM pg_tables WHERE schemaname = 'revoker' AND tablename = 'audit_events')"
            ).collect()
            let (user, tableOwner) = try #require(try owner.first?.decode((String, String).self))
            #expect(user == tableOwner)
            for sql in ["UPDATE revoker.audit_events SET actor = 'x'", "DELETE FROM revoker.audit_events", "TRUNCATE revoker.audit_events"] {
                do {
                    _ = try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect()
                    Issue.record("audit change was accepted: \(sql)")
                } catch let error as PSQLError {
                    #expect(error.serverInfo?[.sqlState] == "RV403")
                }
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.audit_events").collect()
            #expect(try rows.first?.decode(Int.self) == 1)
        }
    }

    @Test func auditPagination() async throws {
        try await Fixtures.withQueue { db, queue in
            for index in 0..<5 { _ = try await queue.enqueue(Fixtures.new("user-\(index)"), actor: "t") }
            let log = AuditLog(client: db.client, logger: Logger(label: "t"))
            var cursor: String?
            var seen: [String] = []
            repeat {
                let page = try await log.query(AuditQuery(clientID: "com.example.app", events: [.enqueued], cursor: cursor, limit: 2))
                seen += page.records.compactMap(\.externalReference)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(seen == (0..<5).map { "user-\($0)" })
        }
    }

    @Test func rolesRestrictAccess() async throws {
        try await Fixtures.withQueue { db, queue in
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("deploy/postgres/roles.sql")
            let sql = try String(contentsOf: path, encoding: .utf8)
            try await db.client.withConnection { connection in
                for statement in sql.components(separatedBy: "END $$;").dropLast() {
                    try await connection.query(PostgresQuery(unsafeSQL: statement + "END $$"), logger: Logger(label: "t"))
                }
                let grants = sql.components(separatedBy: "END $$;").last ?? ""
                for statement in grants.components(separatedBy: ";") {
                    let lines = statement.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("--") }
                    let text = lines.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
                    if !text.isEmpty { try await connection.query(PostgresQuery(unsafeSQL: text), logger: Logger(label: "t")) }
                }
            }
            try await db.client.withConnection { connection in
                let logger = Logger(label: "t")
                try await connection.query("SET ROLE revoker_enqueuer", logger: logger)
                let id = try await connection.query(
                    "SELECT revoker.enqueue_revocation('com.example.app', 'r1', 'refresh_token', 'tok')",
                    logger: logger
                ).collect()
                #expect(id.count == 1)
                let state = try await connection.query("SELECT state FROM revoker.revocation_requests", logger: logger).collect()
                #expect(try state.first?.decode(String.self) == "pending")
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT sealed_credential FROM revoker.revocation_requests", logger: logger).collect()
                }
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT credential FROM revoker.credential_intake", logger: logger).collect()
                }
                await #expect(throws: (any Error).self) {
                    try await connection.query("UPDATE revoker.revocation_requests SET max_attempts = 2", logger: logger)
                }
                try await connection.query("RESET ROLE", logger: logger)
                try await connection.query("SET ROLE revoker_auditor", logger: logger)
                let audit = try await connection.query("SELECT count(*)::int FROM revoker.audit_events", logger: logger).collect()
                #expect(try audit.first?.decode(Int.self) == 1)
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT id FROM revoker.revocation_requests", logger: logger).collect()
                }
                try await connection.query("RESET ROLE", logger: logger)
                try await connection.query("SET ROLE revoker_worker", logger: logger)
                await #expect(throws: (any Error).self) {
                    try await connection.query("DELETE FROM revoker.audit_events", logger: logger)
                }
                try await connection.query("RESET ROLE", logger: logger)
            }
        }
    }
}

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
            do {
                _ = try await db.client.query("SELECT revoker.enqueue_revocation('com.example.app', 'swift-first', 'access_token', 'tok-3')")
                    .collect()
                Issue.record("conflicting SQL replay accepted")
            } catch let error as PSQLError {
                #expect(error.serverInfo?[.sqlState] == "RV409")
            }
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
            let woke = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await queue.withWakeUps { wakeUps in
                        for try await _ in wakeUps { return true }
                        return false
                    }
                }
                group.addTask {
                    // Keep inserting until the listener has started and hears one.
                    for index in 0..<100 {
                        try await Task.sleep(for: .milliseconds(100))
                        _ = try await queue.enqueue(Fixtures.new("wake-\(index)"), actor: "t")
                    }
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            #expect(woke)
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

@Suite("Sealing and configuration")
struct SealingTests {
    @Test func roundTripWrongKeyTamperAndRotation() throws {
        let id = UUID()
        let sealerA = try Fixtures.sealer()
        let credential = Credential(kind: .refreshToken, secret: "r.secret")
        let sealed = try sealerA.seal(credential, requestID: id)
        #expect(sealed.keyID == "a")
        #expect(try sealerA.open(sealed, requestID: id, kind: .refreshToken) == credential)

        let wrong = try Fixtures.sealer("a=" + Data(repeating: 0x33, count: 32).base64EncodedString())
        #expect(throws: RevokerStoreError.self) { try wrong.open(sealed, requestID: id, kind: .refreshToken) }
        var tampered = sealed
        tampered.bytes[tampered.bytes.count - 1] ^= 0x01
        do {
            _ = try sealerA.open(tampered, requestID: id, kind: .refreshToken)
            Issue.record("tampered ciphertext opened")
        } catch {
            #expect(error.code == .unsealFailed)
            #expect(!error.description.contains("r.secret"))
        }
        #expect(throws: RevokerStoreError.self) { try sealerA.open(sealed, requestID: UUID(), kind: .refreshToken) }
        #expect(throws: RevokerStoreError.self) { try sealerA.open(sealed, requestID: id, kind: .accessToken) }

        let rotated = try Fixtures.sealer(Fixtures.keyA + "," + Fixtures.keyB, current: "b")
        #expect(try rotated.open(sealed, requestID: id, kind: .refreshToken) == credential)
        #expect(try rotated.seal(credential, requestID: id).keyID == "b")
        let onlyB = try Fixtures.sealer(Fixtures.keyB)
        do {
            _ = try onlyB.open(sealed, requestID: id, kind: .refreshToken)
            Issue.record("opened without the key")
        } catch {
            #expect(error.code == .unknownKeyID)
        }
    }

    @Test func malformedKeyring() {
        for text in ["", "nokey", "a=notbase64!", "a=" + Data(count: 16).base64EncodedString(), "a b"] {
            #expect(throws: RevokerStoreError.self) { try CredentialKeyring(parsing: text) }
        }
    }

    @Test func databaseURL() throws {
        let configuration = try PostgresClient.Configuration(url: "postgres://u%40x:p%40ss@db.example:6543/revoker?sslmode=disable")
        #expect(configuration.host == "db.example")
        #expect(configuration.port == 6543)
        #expect(configuration.username == "u@x")
        #expect(configuration.password == "p@ss")
        #expect(configuration.database == "revoker")
        for bad in ["mysql://u:hunter2@h/d", "postgres://:hunter2@/d", "postgres://u:hunter2@h/d?sslmode=bogus", "::"] {
            do {
                _ = try PostgresClient.Configuration(url: bad)
                Issue.record("accepted a malformed URL")
            } catch {
                #expect(error.code == .invalidDatabaseURL)
                #expect(!error.description.contains("hunter2"))
                #expect(!String(reflecting: error).contains("hunter2"))
            }
        }
    }
}
