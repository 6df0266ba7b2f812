import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// The trail partitioned by month (migration 0020): the same rows, chains, checkpoints and
/// guarantees as before, across partitions.
@Suite("Audit trail partitioned by month")
struct AuditPartitionTests {
    static let logger = Logger(label: "test")

    /// Rows of a request dated `monthsAgo` back, written through the real trigger with the
    /// history clock (a superuser's session), as a trail of years holds them.
    static func writeEarlier(
        _ request: UUID,
        monthsAgo: Int,
        rows: Int,
        beforeMonthEnd: String = "9 days",
        continuing: Bool = false,
        userIDs: [String] = [],
        _ db: ScratchDatabase
    ) async throws {
        // The g-th row names the g-th user id, if any.
        let users = "ARRAY[" + userIDs.map { "'\($0)'" }.joined(separator: ", ") + "]::text[]"
        try await db.client.withTransaction(logger: logger) { connection in
            try await connection.query("SET LOCAL revoker.history_clock = 'on'", logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO revoker.audit_events (occurred_at, request_id, client_id, external_reference, event, actor, apple_user_id)
                        SELECT date_trunc('month', now(), 'UTC') - interval '\(monthsAgo - 1) months' - interval '\(beforeMonthEnd)'
                                   + g * interval '1 minute',
                               '\(request.uuidString.lowercased())', 'com.example.app', 'old',
                               CASE WHEN g = 1 AND \(!continuing) THEN 'enqueued' ELSE 'note' END, 't', (\(users))[g]
                        FROM generate_series(1, \(rows)) g
                        """
                ),
                logger: logger
            )
        }
    }

    static func ints(_ sql: String, _ db: ScratchDatabase) async throws -> [Int] {
        try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect().map { try $0.decode(Int.self) }
    }

    @Test func theMigrationPartitionsATrailThatAlreadyHoldsRowsAndKeepsItsProof() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { db in
            // Up to 0019, and 0021 that today's queue code writes (a request's trace parent).
            let earlier = Migration.all.filter { $0.version <= 19 || $0.version == 21 }
            try await Migrator(client: db.client, logger: Self.logger, migrations: earlier).migrate()
            try await db.client.query(
                """
                DO $$ BEGIN
                    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'audit_partition_reader') THEN
                        CREATE ROLE audit_partition_reader NOLOGIN;
                    END IF;
                END $$
                """
            )
            try await db.client.query("GRANT SELECT ON revoker.audit_events TO audit_partition_reader")
            let queue = RevocationQueue(client: db.client, sealer: try Fixtures.sealer(), logger: Self.logger)
            let old = UUID()
            try await Self.writeEarlier(old, monthsAgo: 2, rows: 3, db)
            try await Self.writeEarlier(UUID(), monthsAgo: 1, rows: 4, db)
            var pending: [UUID] = []
            for index in 0..<5 {
                pending.append(try await queue.enqueue(Fixtures.new("before-\(index)"), actor: "t").request.id)
            }
            let key = AuditSigningKey()
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            // Every transaction has ended: one checkpoint covers them all (the verifier reads 0022's tables).
            _ = try #require(try await checkpoints.take(signer: AuditSigner(key: key, trustedKeys: [])))
            let rowsBefore = try await db.client.query("SELECT id, hash FROM revoker.audit_events ORDER BY id").collect()
                .map { try $0.decode((Int64, Data).self) }
            #expect(rowsBefore.count >= 12)

            try await Migrator(client: db.client, logger: Self.logger).migrate()

            let rowsAfter = try await db.client.query("SELECT id, hash FROM revoker.audit_events ORDER BY id").collect()
                .map { try $0.decode((Int64, Data).self) }
            #expect(rowsAfter.map(\.0) == rowsBefore.map(\.0))
            #expect(rowsAfter.map(\.1) == rowsBefore.map(\.1))
            // Three months hold rows; this month and three ahead have partitions.
            #expect(try await Self.ints("SELECT count(DISTINCT tableoid)::int FROM revoker.audit_events", db) == [3])
            let partitions = try await Self.ints(
                """
                SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'revoker.audit_events'::regclass
                  AND inhrelid::regclass::text >= 'revoker.audit_events_' || to_char(now() AT TIME ZONE 'UTC', 'YYYY_MM')
                """,
                db
            )
            #expect(partitions == [4])
            #expect(try await checkpoints.ensurePartitions() == 0)
            // Who could read the trail still can, through the parent only.
            let month = "revoker.audit_events_" + Self.month(monthsAgo: 0)
            let privileges = try await db.client.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT has_table_privilege('audit_partition_reader', 'revoker.audit_events', 'SELECT'),
                               has_table_privilege('audit_partition_reader', '\(month)', 'SELECT')
                        """
                )
            ).collect().first?.decode((Bool, Bool).self)
            #expect(privileges?.0 == true)
            #expect(privileges?.1 == false)

            let before = try await verifier.verify(keys: [key.publicKey])
            #expect(before.intact, "\(before.problems)")
            #expect(before.rowsChecked == rowsBefore.count)
            // The chain of two months ago continues this month, after its last row there.
            let chain = old.uuidString.lowercased()
            try await db.client.query(
                "INSERT INTO revoker.audit_events (request_id, client_id, event, actor) VALUES (\(old), 'com.example.app', 'note', 't')"
            )
            let seqs = try await Self.ints("SELECT chain_seq::int FROM revoker.audit_events WHERE chain_key = '\(chain)' ORDER BY id", db)
            #expect(seqs == [1, 2, 3, 4])
            _ = try await queue.cancel(id: pending[0], actor: "ops")
            _ = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
            let after = try await verifier.verify(keys: [key.publicKey])
            #expect(after.intact, "\(after.problems)")
            #expect(after.rowsChecked > before.rowsChecked)
        }
    }

    @Test func aRowChangedRemovedOrMovedAcrossAMonthIsNamed() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            _ = try await db.client.query("SELECT revoker.audit_add_partitions(now() - interval '3 months', now())").collect()
            var chains: [String] = []
            for _ in 0..<3 {
                let request = UUID()
                try await Self.writeEarlier(request, monthsAgo: 1, rows: 2, db)
                // The same chain goes on this month.
                try await db.client.query(
                    "INSERT INTO revoker.audit_events (request_id, client_id, event, actor) VALUES (\(request), 'com.example.app', 'note', 't')"
                )
                chains.append(request.uuidString.lowercased())
            }
            _ = try await queue.enqueue(Fixtures.new("now"), actor: "t")
            _ = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
            #expect(try await Self.ints("SELECT count(DISTINCT tableoid)::int FROM revoker.audit_events", db) == [2])
            let intact = try await verifier.verify(keys: [key.publicKey])
            #expect(intact.intact, "\(intact.problems)")

            // Last month's row rewritten, and its chain rehashed on into this month.
            try await Self.tamper(
                "UPDATE revoker.audit_events SET detail = 'rewritten' WHERE chain_key = '\(chains[0])' AND chain_seq = 1",
                AuditTampering.rehashChain(chains[0]),
                db: db
            )
            // Last month's end of a chain removed: this month's row no longer follows it.
            try await Self.tamper("DELETE FROM revoker.audit_events WHERE chain_key = '\(chains[1])' AND chain_seq = 2", db: db)
            // A row moved from last month into this one (its partition changes with its time).
            try await Self.tamper(
                "UPDATE revoker.audit_events SET occurred_at = now() WHERE chain_key = '\(chains[2])' AND chain_seq = 1",
                db: db
            )
            let found = try await verifier.verify(keys: [key.publicKey])
            #expect(!found.intact)
            let kinds = Set(found.problems.map(\.kind))
            #expect(kinds.isSuperset(of: [.checkpointMismatch, .removed, .changed]), "\(found.problems)")
            for chain in chains[1...] {
                #expect(found.problems.contains { $0.message.contains(chain) }, "\(chain): \(found.problems)")
            }
        }
    }

    @Test func aPartitionIsAppendOnlyByNameAndATimeGivenIsRefused() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-1"), actor: "t")
            let month = "revoker.audit_events_" + Self.month(monthsAgo: 0)
            for sql in ["UPDATE \(month) SET actor = 'x'", "DELETE FROM \(month)", "TRUNCATE \(month)"] {
                let error = await #expect(throws: PSQLError.self, "\(sql)") {
                    _ = try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect()
                }
                #expect(error?.serverInfo?[.sqlState] == "RV403", "\(sql)")
            }
            // A row inserted into a partition by name is stamped and chained like any other.
            try await db.client.query(
                PostgresQuery(unsafeSQL: "INSERT INTO \(month) (client_id, event, actor) VALUES ('com.example.app', 'note', 't')")
            ).collect()
            // A writer cannot date a row: a time of last month is refused, not stamped over.
            _ = try await db.client.query("SELECT revoker.audit_add_partitions(now() - interval '2 months', now())").collect()
            let error = await #expect(throws: PSQLError.self) {
                try await db.client.query(
                    "INSERT INTO revoker.audit_events (occurred_at, client_id, event, actor) VALUES (now() - interval '40 days', 'com.example.app', 'note', 't')"
                ).collect()
            }
            #expect(error?.serverInfo?[.sqlState] == "42501")
            let rows = try await db.client.query(
                "SELECT count(*)::int, count(*) FILTER (WHERE hash = revoker.audit_row_hash(prev_hash, a))::int FROM revoker.audit_events a"
            ).collect().first?.decode((Int, Int).self)
            #expect(rows?.0 == 2)
            #expect(rows?.1 == rows?.0)
            #expect(try await AuditVerifier(client: db.client, logger: Self.logger).verify(keys: []).intact)
        }
    }

    static func month(monthsAgo: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let date = calendar.date(byAdding: .month, value: -monthsAgo, to: Date())!
        let parts = calendar.dateComponents([.year, .month], from: date)
        return String(format: "%04d_%02d", parts.year!, parts.month!)
    }

    /// What an owner rewriting the trail runs, with the triggers off for the session.
    static func tamper(_ statements: String..., db: ScratchDatabase) async throws {
        try await db.client.withTransaction(logger: logger) { connection in
            try await connection.query("SET LOCAL session_replication_role = replica", logger: logger)
            for statement in statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }
}
