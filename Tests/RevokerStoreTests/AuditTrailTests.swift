import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Audit trail and roles")
struct AuditTrailTests {
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
                let error = await #expect(throws: PSQLError.self, "\(sql)") {
                    _ = try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect()
                }
                #expect(error?.serverInfo?[.sqlState] == "RV403", "\(sql)")
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
                // Custody: register a grant and see where it stands, never its token.
                let grant = try await connection.query(
                    "SELECT revoker.register_grant('apple', 'com.example.app', 'account-1', 'refresh_token', 'r.held')",
                    logger: logger
                ).collect()
                #expect(grant.count == 1)
                let held = try await connection.query("SELECT state FROM revoker.grant_states", logger: logger).collect()
                #expect(try held.first?.decode(String.self) == "pending")
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT sealed_token FROM revoker.grants", logger: logger).collect()
                }
                // Deletion by reference, and how it stands.
                _ = try await connection.query("SELECT revoker.request_account_deletion('account-1')", logger: logger).collect()
                let deletion = try await connection.query("SELECT state FROM revoker.deletion_states", logger: logger).collect()
                #expect(try deletion.first?.decode(String.self) == "pending", "its grant is still being taken in")
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT revoker.complete_deletion(gen_random_uuid())", logger: logger).collect()
                }
                try await connection.query("RESET ROLE", logger: logger)
                try await connection.query("SET ROLE revoker_auditor", logger: logger)
                let deletions = try await connection.query("SELECT count(*)::int FROM revoker.deletion_states", logger: logger).collect()
                #expect(try deletions.first?.decode(Int.self) == 1)
                let states = try await connection.query("SELECT count(*)::int FROM revoker.grant_states", logger: logger).collect()
                #expect(try states.first?.decode(Int.self) == 1)
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT sealed_token FROM revoker.grants", logger: logger).collect()
                }
                let audit = try await connection.query("SELECT count(*)::int FROM revoker.audit_events", logger: logger).collect()
                #expect(try audit.first?.decode(Int.self) == 3, "the enqueue's row, the registration's and the deletion's")
                // Heads move when a checkpoint covers their rows; there is none yet.
                let heads = try await connection.query("SELECT count(*)::int FROM revoker.audit_chains", logger: logger).collect()
                #expect(try heads.first?.decode(Int.self) == 0)
                await #expect(throws: (any Error).self) {
                    _ = try await connection.query("SELECT id FROM revoker.revocation_requests", logger: logger).collect()
                }
                try await connection.query("RESET ROLE", logger: logger)
                try await connection.query("SET ROLE revoker_worker", logger: logger)
                await #expect(throws: (any Error).self) {
                    try await connection.query("DELETE FROM revoker.audit_events", logger: logger)
                }
                // The service appends audit rows, the trigger chains them; it cannot move a chain's head.
                try await connection.query(
                    "INSERT INTO revoker.audit_events (client_id, event, actor) VALUES ('com.example.app', 'note', 'ops')",
                    logger: logger
                )
                await #expect(throws: (any Error).self) {
                    try await connection.query("UPDATE revoker.audit_chains SET last_seq = 1", logger: logger)
                }
                let advanced = try await connection.query("SELECT revoker.audit_advance_heads()", logger: logger).collect()
                #expect(try advanced.first?.decode(Int.self) == 0)
                // It keeps partitions ahead through the function, and cannot touch one by name.
                let added = try await connection.query("SELECT revoker.audit_ensure_partitions()", logger: logger).collect()
                #expect(try added.first?.decode(Int.self) == 0)
                let month = "revoker.audit_events_" + AuditPartitionTests.month(monthsAgo: 0)
                for sql in ["SELECT count(*) FROM \(month)", "DELETE FROM \(month)", "INSERT INTO \(month) (event, actor) VALUES ('note', 'x')"] {
                    let refused = await #expect(throws: PSQLError.self, "\(sql)") {
                        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
                    }
                    #expect(refused?.serverInfo?[.sqlState] == "42501", "\(sql)")
                }
                await #expect(throws: (any Error).self) {
                    try await connection.query("SELECT revoker.audit_add_partitions(now() - interval '1 year', now())", logger: logger).collect()
                }
                await #expect(throws: (any Error).self) {
                    try await connection.query("DELETE FROM revoker.audit_checkpoints", logger: logger)
                }
                // The service stores a notification; its event is written by the outbox's trigger,
                // which the service's role could not do itself.
                try await connection.query(
                    """
                    INSERT INTO revoker.provider_messages
                        (provider, message_id, client_id, type, user_id, ends_grants, event_type, event_time, issued_at, issuer, key_id)
                    VALUES ('apple', 'jti-roles', 'com.example.app', 'email-enabled', 'u1', false, 'apple.email_enabled', now(), now(),
                            'https://appleid.apple.com', 'k1')
                    """,
                    logger: logger
                )
                await #expect(throws: (any Error).self) {
                    try await connection.query(
                        "INSERT INTO revoker.outbox_events (type, client_id) VALUES ('apple.email_enabled', 'x')",
                        logger: logger
                    )
                }
                await #expect(throws: (any Error).self) {
                    try await connection.query("DELETE FROM revoker.provider_messages", logger: logger)
                }
                // Retention deletes from the outbox through its function only (nothing here is old).
                await #expect(throws: (any Error).self) {
                    try await connection.query("DELETE FROM revoker.outbox_events", logger: logger)
                }
                let pruned = try await connection.query(
                    "SELECT revoker.prune_events(now() - interval '1 day', ARRAY[]::text[])::int",
                    logger: logger
                ).collect()
                #expect(try pruned.first?.decode(Int.self) == 0)
                // Another provider's message of the same id is its own.
                try await connection.query(
                    """
                    INSERT INTO revoker.provider_messages
                        (provider, message_id, client_id, type, user_id, ends_grants, event_type, issued_at, issuer, key_id, details)
                    VALUES ('google', 'jti-roles', 'com.example.app', 'sessions-revoked', 'g1', false, 'google.sessions_revoked', now(),
                            'https://accounts.google.com/', 'k1', '{"audience": "com.example.app"}')
                    """,
                    logger: logger
                )
                // A worker's liveness: its lock and its registration; a rescuer marks and forgets owners.
                try await connection.query("SELECT pg_advisory_lock(1920364290, revoker.worker_lock('w-roles'))", logger: logger)
                try await connection.query(
                    "INSERT INTO revoker.workers (owner) VALUES ('w-roles') ON CONFLICT (owner) DO UPDATE SET lock_lost_at = NULL",
                    logger: logger
                )
                try await connection.query("SELECT pg_advisory_unlock(1920364290, revoker.worker_lock('w-roles'))", logger: logger)
                try await connection.query("UPDATE revoker.workers SET lock_lost_at = now() WHERE owner = 'w-roles'", logger: logger)
                try await connection.query("DELETE FROM revoker.workers WHERE owner = 'w-roles'", logger: logger)
                try await connection.query("RESET ROLE", logger: logger)
                // A backend in the same database reads the feed.
                try await connection.query("SET ROLE revoker_enqueuer", logger: logger)
                let visible = try await eventuallyValue("the event readable", every: .milliseconds(100)) {
                    let rows = try await connection.query(
                        "SELECT count(*)::int FROM revoker.events WHERE type = 'apple.email_enabled'",
                        logger: logger
                    )
                    .collect()
                    let count = try rows.first?.decode(Int.self) ?? 0
                    return count == 0 ? nil : count
                }
                #expect(visible == 1)
                try await connection.query("RESET ROLE", logger: logger)
            }
        }
    }
}
