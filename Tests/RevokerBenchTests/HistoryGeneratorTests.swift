import Foundation
import Logging
import PostgresNIO
import RevokerBench
import RevokerEvidence
import RevokerLocalStack
import RevokerStore
import Testing

/// The history of years `scripts/bench-history` measures: written through the real trigger,
/// resumable, and a trail `revoker audit verify` finds intact (and tampered once changed).
@Suite("revoker bench --history")
struct HistoryGeneratorTests {
    static let logger = Logger(label: "test.history")

    /// Runs `body` with options for a history in a database of its own, dropped afterwards.
    static func withHistory(_ body: (HistoryOptions, PostgresClient) async throws -> Void) async throws {
        let server = try ScratchDatabase.baseURL()
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("history-keys-\(UUID().uuidString)").path
        var options = HistoryOptions(serverURL: server, keysDirectory: keys)
        options.database = "revoker_history_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        options.auditRows = 6_000
        options.grants = 300
        options.days = 6
        options.checkpointsPerDay = 2
        defer { try? FileManager.default.removeItem(atPath: keys) }
        var adminConfiguration = try PostgresClient.Configuration(url: server)
        adminConfiguration.options.maximumConnections = 1
        let admin = PostgresClient(configuration: adminConfiguration)
        let adminTask = Task { await admin.run() }
        defer { adminTask.cancel() }
        var configuration = try PostgresClient.Configuration(url: server)
        configuration.database = options.database
        configuration.options.maximumConnections = 2
        let client = PostgresClient(configuration: configuration)
        let result: Result<Void, any Error>
        do {
            // The client connects lazily: its database exists once the generator has run.
            let running = Task { await client.run() }
            defer { running.cancel() }
            result = .success(try await body(options, client))
        } catch {
            result = .failure(error)
        }
        _ = try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \"\(options.database)\" WITH (FORCE)"), logger: logger)
            .collect()
        try result.get()
    }

    static func publicKey(_ options: HistoryOptions) throws -> AuditPublicKey {
        let pem = try String(contentsOfFile: options.keysDirectory + "/audit-signing-key.pem", encoding: .utf8)
        return try AuditSigningKey(pemRepresentation: pem).publicKey
    }

    @Test func aHistoryWrittenInTwoRunsIsTheWholePlanChainedCheckpointedAndIntact() async throws {
        try await Self.withHistory { options, client in
            var first = options
            first.stopAfterDays = 2
            let partial = try await HistoryGenerator(options: first).run()
            #expect(partial.daysWrittenNow == 2)
            // The second run resumes after the second day; a third finds nothing left to write.
            let summary = try await HistoryGenerator(options: options).run()
            #expect(summary.daysWrittenNow == 4)
            #expect(try await HistoryGenerator(options: options).run().daysWrittenNow == 0)

            #expect(summary.grants == 300)
            #expect(summary.checkpoints == 12)
            #expect(summary.revocations > 0)
            // Each day keeps to the plan's pace within one revocation's rows.
            #expect(abs(summary.auditRows - 6_000) < 6 * 12, "\(summary.auditRows)")
            let counted = try await client.query("SELECT count(*) FROM revoker.audit_events", logger: Self.logger).collect()
            #expect(try counted.first?.decode(Int64.self) == summary.auditRows)

            // Rows carry their day's times, every day of the plan, and a checkpoint dated at the end of each half day.
            let spread = try await client.query(
                """
                SELECT count(DISTINCT date_trunc('day', occurred_at AT TIME ZONE 'UTC'))::int,
                       (SELECT count(*)::int FROM revoker.audit_checkpoints WHERE created_at = date_trunc('day', created_at))
                FROM revoker.audit_events WHERE request_id IS NOT NULL
                """,
                logger: Self.logger
            ).collect()
            let (days, midnightCheckpoints) = try #require(try spread.first?.decode((Int, Int).self))
            #expect(days >= 6)
            #expect(midnightCheckpoints == 6)
            // Every held grant's token opens with the history's key, bound to its grant.
            let keyring = try CredentialKeyring(parsing: try String(contentsOfFile: options.keysDirectory + "/sealing-keys", encoding: .utf8))
            let sealer = CredentialSealer(keyring: keyring)
            let held = try await client.query(
                "SELECT id, sealed_token, token_key_id FROM revoker.grants WHERE state = 'held' ORDER BY random() LIMIT 20",
                logger: Self.logger
            ).collect()
            #expect(held.count == 20)
            for row in held {
                let (id, sealed, keyID) = try row.decode((UUID, Data, String).self)
                let token = try sealer.open(SealedCredential(keyID: keyID, bytes: Array(sealed)), grantID: id, kind: .refreshToken)
                #expect(token.kind == .refreshToken)
            }

            // One event per finished request, dated when it finished (not when it was written: the
            // history's last hour may be the clock's last hour, so "not recent" would not say it).
            let events = try await client.query(
                """
                SELECT (SELECT count(*)::int FROM revoker.outbox_events WHERE type LIKE 'grant.%' OR type LIKE 'revocation.%'),
                       (SELECT count(*)::int FROM revoker.revocation_requests),
                       (SELECT count(*)::int FROM revoker.outbox_events e JOIN revoker.revocation_requests r ON r.id = e.request_id
                         WHERE (e.type LIKE 'grant.%' OR e.type LIKE 'revocation.%') AND e.occurred_at <> r.finished_at)
                """,
                logger: Self.logger
            ).collect()
            let (finished, requests, misdated) = try #require(try events.first?.decode((Int, Int, Int).self))
            #expect(finished == requests && misdated == 0, "\(finished) \(requests) \(misdated)")

            let key = try Self.publicKey(options)
            let verified = try await AuditVerifier(client: client, logger: Self.logger).verify(keys: [key])
            #expect(verified.intact, "\(verified.text)")
            #expect(verified.rowsChecked == Int(summary.auditRows))
            #expect(verified.checkpointsChecked == 12)

            // The counts status reads (kept by triggers, also for the generator's replica-mode writes)
            // are the tables' own, and stay so through prune and a fold.
            let queue = RevocationQueue(client: client, sealer: sealer, logger: Self.logger)
            try await Self.expectKeptCountsMatchTheTables(queue, client)
            let cutoff = try #require(Calendar(identifier: .gregorian).date(byAdding: .day, value: -3, to: Date()))
            #expect(try await queue.prune(finishedBefore: cutoff, batchSize: 100) > 100)
            try await Self.expectKeptCountsMatchTheTables(queue, client)
            _ = try await client.query("SELECT revoker.compact_counts()", logger: Self.logger).collect()
            let folded = try await client.query("SELECT count(*)::int FROM revoker.request_counts", logger: Self.logger).collect()
            #expect(try folded.first?.decode(Int.self) ?? .max <= 4 * 9)
            try await Self.expectKeptCountsMatchTheTables(queue, client)

            // An auditor's daily run starts at the checkpoint verified before (the fourth day's last): two days, not six.
            let stored = try await AuditCheckpoints(client: client, logger: Self.logger).all()
            let verifier = AuditVerifier(client: client, logger: Self.logger)
            let daily = try await verifier.verify(keys: [key], witnessed: [stored[7]], afterNewestWitness: true)
            #expect(daily.intact, "\(daily.text)")
            #expect(daily.checkpointsChecked == 4)
            #expect(daily.rowsChecked > 0 && daily.rowsChecked < verified.rowsChecked / 2, "\(daily.rowsChecked)")

            // One changed row of the last day (a superuser with triggers off) is named by both.
            try await client.withConnection { connection in
                _ = try await connection.query("SET session_replication_role = replica", logger: Self.logger).collect()
                _ = try await connection.query(
                    "UPDATE revoker.audit_events SET detail = 'outcome=revoked' WHERE id = (SELECT max(id) FROM revoker.audit_events WHERE event = 'failed')",
                    logger: Self.logger
                ).collect()
                _ = try await connection.query("SET session_replication_role = origin", logger: Self.logger).collect()
            }
            let tampered = try await AuditVerifier(client: client, logger: Self.logger).verify(keys: [key])
            #expect(!tampered.intact)
            #expect(tampered.problems.contains { $0.kind == .changed })
            let dailyTampered = try await verifier.verify(keys: [key], witnessed: [stored[7]], afterNewestWitness: true)
            #expect(dailyTampered.problems.contains { $0.kind == .changed }, "\(dailyTampered.text)")
        }
    }

    static func expectKeptCountsMatchTheTables(_ queue: RevocationQueue, _ client: PostgresClient) async throws {
        let statistics = try await queue.statistics()
        let requests = try await client.query(
            "SELECT state, outcome, count(*)::int FROM revoker.revocation_requests GROUP BY 1, 2",
            logger: Self.logger
        ).collect()
        var byOutcome: [QueueStatistics.Outcome: Int] = [:]
        for row in requests {
            let (state, outcome, count) = try row.decode((String, String?, Int).self)
            if let state = RevocationState(rawValue: state), let outcome = outcome.flatMap(RevocationOutcome.init(rawValue:)) {
                byOutcome[QueueStatistics.Outcome(state: state, outcome: outcome)] = count
            }
        }
        #expect(statistics.byOutcome == byOutcome)
        let grants = try await client.query("SELECT provider, state, count(*)::int FROM revoker.grants GROUP BY 1, 2", logger: Self.logger)
            .collect()
        var byGrant: [QueueStatistics.GrantCount: Int] = [:]
        for row in grants {
            let (provider, state, count) = try row.decode((String, String, Int).self)
            if let state = GrantState(rawValue: state) { byGrant[QueueStatistics.GrantCount(provider: provider, state: state)] = count }
        }
        #expect(statistics.grants == byGrant)
    }

    @Test func aRunAskingForAnotherPlanIsRefusedAndWritesNothing() async throws {
        try await Self.withHistory { options, client in
            var first = options
            first.stopAfterDays = 1
            _ = try await HistoryGenerator(options: first).run()
            var other = options
            other.auditRows = 9_000
            await #expect(throws: BenchmarkFailure.self) { try await HistoryGenerator(options: other).run() }
            let parts = try await client.query("SELECT count(*)::int FROM revoker_history.parts", logger: Self.logger).collect()
            #expect(try parts.first?.decode(Int.self) == 2)
        }
    }

    /// Only a superuser's session keeps the times it brings, and never before its chain's last row.
    @Test func theHistoryClockIsASuperusersAndKeepsEachChainInOrder() async throws {
        try await ScratchDatabase.withScratchDatabase(.migrated) { database in
            try await database.client.withConnection { connection in
                let insert = """
                    INSERT INTO revoker.audit_events (occurred_at, client_id, event, actor)
                    VALUES ('2024-03-01 12:00:00+00', 'com.example.app', 'note', 'test')
                    """
                // The trail is partitioned by month (migration 0020): those months need theirs.
                _ = try await connection.query("SELECT revoker.audit_add_partitions('2024-02-01', '2024-03-01')", logger: Self.logger)
                    .collect()
                _ = try await connection.query("BEGIN", logger: Self.logger).collect()
                _ = try await connection.query("SET LOCAL revoker.history_clock = 'on'", logger: Self.logger).collect()
                _ = try await connection.query(PostgresQuery(unsafeSQL: insert), logger: Self.logger).collect()
                let kept = try await connection.query(
                    "SELECT occurred_at = '2024-03-01 12:00:00+00' FROM revoker.audit_events ORDER BY id DESC LIMIT 1",
                    logger: Self.logger
                ).collect()
                #expect(try kept.first?.decode(Bool.self) == true)
                // A row of the same chain dated before it is refused.
                let earlier = insert.replacingOccurrences(of: "2024-03-01", with: "2024-02-01")
                await #expect(throws: PSQLError.self) {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: earlier), logger: Self.logger).collect()
                }
                _ = try await connection.query("ROLLBACK", logger: Self.logger).collect()

                // A session of another role that may write audit rows, setting it, is refused (the
                // role exists only in this transaction).
                let role = "history_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
                _ = try await connection.query("BEGIN", logger: Self.logger).collect()
                for statement in [
                    "CREATE ROLE \(role) NOLOGIN", "GRANT USAGE ON SCHEMA revoker TO \(role)",
                    "GRANT INSERT ON revoker.audit_events TO \(role)", "GRANT USAGE ON SEQUENCE revoker.audit_events_id_seq TO \(role)",
                    "SET LOCAL SESSION AUTHORIZATION \(role)",
                ] {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: Self.logger).collect()
                }
                _ = try await connection.query("SET LOCAL revoker.history_clock = 'on'", logger: Self.logger).collect()
                let refused = await #expect(throws: PSQLError.self) {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: insert), logger: Self.logger).collect()
                }
                #expect(refused?.serverInfo?[.sqlState] == "42501")
                _ = try await connection.query("ROLLBACK", logger: Self.logger).collect()
                // Without it, a time the row brings is refused: the trigger stamps its own.
                let given = await #expect(throws: PSQLError.self) {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: insert), logger: Self.logger).collect()
                }
                #expect(given?.serverInfo?[.sqlState] == "42501")
            }
        }
    }
}
