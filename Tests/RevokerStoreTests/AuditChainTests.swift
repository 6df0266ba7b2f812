import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Audit chains and checkpoints")
struct AuditChainTests {
    static let logger = Logger(label: "test")

    /// A request and its audit rows as a binary of an older schema wrote them (today's store
    /// code speaks today's schema only).
    @discardableResult
    static func legacyEnqueue(_ reference: String, cancelled: Bool, _ db: ScratchDatabase) async throws -> UUID {
        let id = UUID()
        let digest = ByteBuffer(bytes: Array(repeating: UInt8(7), count: 32))
        try await db.client.query(
            """
            INSERT INTO revoker.revocation_requests
                (id, client_id, external_reference, credential_kind, enqueued_kind, credential_digest,
                 state, outcome, finished_at)
            VALUES (\(id), 'com.example.app', \(reference), 'refresh_token', 'refresh_token', \(digest),
                    \(cancelled ? "cancelled" : "pending"), \(cancelled ? "cancelled" : nil), \(cancelled ? Date() : nil))
            """
        )
        for event in ["enqueued"] + (cancelled ? ["cancelled", "credential_erased"] : []) {
            try await db.client.query(
                """
                INSERT INTO revoker.audit_events (request_id, client_id, external_reference, event, attempt, actor)
                VALUES (\(id), 'com.example.app', \(reference), \(event), 0, 't')
                """
            )
        }
        return id
    }

    static func count(_ sql: String, _ db: ScratchDatabase) async throws -> Int {
        try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect().first?.decode(Int.self) ?? -1
    }

    @Test func everyWriterChainsItsRowsAndTheSwiftHashAgreesWithTheDatabase() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            // The Swift path, concurrently; the SQL path; claims; app pauses; odd text.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    group.addTask { _ = try await queue.enqueue(Fixtures.new("user-\(index) ✓\u{1F600}"), actor: "t") }
                }
                try await group.waitForAll()
            }
            let claimed = try await Fixtures.enqueueAndClaim(5, db: db, queue: queue)
            #expect(claimed.count >= 5)
            let first = try #require(try await queue.list(RevocationFilter(limit: 1)).first)
            _ = try await queue.cancel(id: first.id, actor: "ops")
            try await queue.pauseApp(clientID: "com.example.app", reason: ErrorDetail(code: "invalid_client"), probeAfter: .seconds(60), actor: "ops")
            _ = try await queue.resumeApp(clientID: "com.example.app", actor: "ops")

            let before = try await verifier.verify(keys: [key.publicKey])
            #expect(before.intact, "\(before.problems)")
            #expect(before.rowsChecked == (try await Self.count("SELECT count(*)::int FROM revoker.audit_events", db)))
            #expect(before.chainsChecked == (try await Self.count("SELECT count(DISTINCT chain_key)::int FROM revoker.audit_events", db)))
            #expect(before.chainsChecked >= 18)
            #expect(before.checkpointsChecked == 0)

            let checkpoint = try #require(try await Self.checkpointEverything(checkpoints, verifier, key))
            #expect(checkpoint.seq >= 1)
            let after = try await verifier.verify(keys: [key.publicKey])
            #expect(after.intact, "\(after.problems)")
            #expect(after.rowsNotYetCheckpointed == 0)
            #expect(after.checkpointsChecked == (try await checkpoints.all().count))

            // More rows, then a second checkpoint that continues the first.
            _ = try await queue.enqueue(Fixtures.new("user-late"), actor: "t")
            let pending = try await verifier.verify(keys: [key.publicKey])
            #expect(pending.intact && pending.rowsNotYetCheckpointed >= 1)
            let second = try #require(try await Self.checkpointEverything(checkpoints, verifier, key))
            #expect(second.seq > checkpoint.seq)
            #expect(second.previousHash.count == 32)
            let all = try await checkpoints.all()
            #expect(zip(all, all.dropFirst()).allSatisfy { $1.previousHash == $0.hash && $1.txidFrom == $0.txidTo })
            #expect(try await verifier.verify(keys: [key.publicKey]).intact)

            // A key that did not sign them is named, and is not tampering.
            let unknown = try await verifier.verify(keys: [AuditSigningKey().publicKey])
            #expect(!unknown.problems.isEmpty && unknown.problems.allSatisfy { $0.kind == .unknownKey })
        }
    }

    /// Takes checkpoints until none of the rows is left out (other tests' open transactions on
    /// the same server can hold the horizon back for a while).
    static func checkpointEverything(
        _ checkpoints: AuditCheckpoints,
        _ verifier: AuditVerifier,
        _ key: AuditSigningKey
    ) async throws -> AuditCheckpoint? {
        try await checkpointEverything(checkpoints, verifier, AuditSigner(key: key, trustedKeys: []))
    }

    /// The same with a signer that remembers what it signed.
    static func checkpointEverything(
        _ checkpoints: AuditCheckpoints,
        _ verifier: AuditVerifier,
        _ signer: AuditSigner
    ) async throws -> AuditCheckpoint? {
        var last: AuditCheckpoint?
        try await eventually("every row inside a checkpoint", every: .milliseconds(200)) {
            if let taken = try await checkpoints.take(signer: signer) { last = taken }
            return try await verifier.verify(keys: [signer.key.publicKey]).rowsNotYetCheckpointed == 0
        }
        return last
    }

    @Test func writersOfOneChainQueueBehindItsHeadAndLeaveNoGap() async throws {
        try await Fixtures.withQueue { db, queue in
            let request = try await queue.enqueue(Fixtures.new("user-busy"), actor: "t").request
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<6 {
                    group.addTask {
                        for index in 0..<15 {
                            _ = try await db.client.query(
                                """
                                INSERT INTO revoker.audit_events (request_id, client_id, event, actor, detail)
                                VALUES (\(request.id), 'com.example.app', 'note', 'sql:postgres', \("writer \(writer) note \(index)"))
                                """
                            ).collect()
                        }
                    }
                }
                try await group.waitForAll()
            }
            let rows = try await db.client.query(
                "SELECT chain_seq, id FROM revoker.audit_events WHERE chain_key = \(request.id.uuidString.lowercased()) ORDER BY chain_seq"
            ).collect()
            let positions = try rows.map { try $0.decode((Int64, Int64).self) }
            #expect(positions.map(\.0) == Array(1...91))
            #expect(positions.map(\.1) == positions.map(\.1).sorted())
            let result = try await AuditVerifier(client: db.client, logger: Self.logger).verify(keys: [])
            #expect(result.intact, "\(result.problems)")
        }
    }

    @Test func rowsWrittenBeforeTheMigrationAreChainedFromARecordedGenesis() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { db in
            try await Migrator(client: db.client, logger: Self.logger, migrations: Array(Migration.all.prefix(5))).migrate()
            let queue = RevocationQueue(client: db.client, sealer: try Fixtures.sealer(), logger: Self.logger)
            for index in 0..<4 {
                try await Self.legacyEnqueue("old-\(index)", cancelled: index.isMultiple(of: 2), db)
            }
            let before = try await Self.count("SELECT count(*)::int FROM revoker.audit_events", db)
            #expect(before >= 8)
            try await Migrator(client: db.client, logger: Self.logger).migrate()
            _ = try await queue.enqueue(Fixtures.new("new-0"), actor: "t")
            let result = try await AuditVerifier(client: db.client, logger: Self.logger).verify(keys: [])
            #expect(result.intact, "\(result.problems)")
            #expect(result.genesis?.rowsBroughtIn == Int64(before))
            #expect(result.rowsChecked == before + 1)
        }
    }

    /// Migration 0007 moved the heads from every write to the checkpoints: rows chained under
    /// 0006's heads, then under 0007's lock, verify as one trail, and a checkpoint moves each
    /// head to its chain's last covered row.
    @Test func headsMoveWithCheckpointsAcrossTheUpgradeFromTriggerKeptHeads() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { db in
            try await Migrator(client: db.client, logger: Self.logger, migrations: Array(Migration.all.prefix(6))).migrate()
            let queue = RevocationQueue(client: db.client, sealer: try Fixtures.sealer(), logger: Self.logger)
            let oldID = try await Self.legacyEnqueue("before-0007", cancelled: false, db)
            let chain = oldID.uuidString.lowercased()
            let headBefore = try await Self.count("SELECT last_seq::int FROM revoker.audit_chains WHERE chain_key = '\(chain)'", db)
            #expect(headBefore >= 1)
            try await Migrator(client: db.client, logger: Self.logger).migrate()
            _ = try await queue.cancel(id: oldID, actor: "ops")
            let fresh = try await queue.enqueue(Fixtures.new("after-0007"), actor: "t").request
            let freshChain = fresh.id.uuidString.lowercased()
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let key = AuditSigningKey()
            // Rows beyond a head that no checkpoint covers yet are not a problem.
            #expect(try await verifier.verify(keys: [key.publicKey]).intact)
            #expect(try await Self.count("SELECT count(*)::int FROM revoker.audit_chains WHERE chain_key = '\(freshChain)'", db) == 0)
            let lastSeq = try await Self.count("SELECT max(chain_seq)::int FROM revoker.audit_events WHERE chain_key = '\(chain)'", db)
            #expect(lastSeq > headBefore)

            _ = try #require(try await Self.checkpointEverything(AuditCheckpoints(client: db.client, logger: Self.logger), verifier, key))
            #expect(try await Self.count("SELECT last_seq::int FROM revoker.audit_chains WHERE chain_key = '\(chain)'", db) == lastSeq)
            #expect(try await Self.count("SELECT last_seq::int FROM revoker.audit_chains WHERE chain_key = '\(freshChain)'", db) >= 1)
            let after = try await verifier.verify(keys: [key.publicKey])
            #expect(after.intact, "\(after.problems)")

            // The newest row of a covered chain removed: named by the head the checkpoint moved.
            try await db.client.withTransaction(logger: Self.logger) { connection in
                try await connection.query("SET LOCAL session_replication_role = replica", logger: Self.logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM revoker.audit_events WHERE chain_key = '\(chain)' AND chain_seq = \(lastSeq)"),
                    logger: Self.logger
                )
            }
            let tampered = try await verifier.verify(keys: [key.publicKey])
            #expect(
                tampered.problems.contains { $0.kind == .removed && $0.chain == chain && $0.message.contains("#\(lastSeq)…#\(lastSeq)") },
                "\(tampered.problems)"
            )
        }
    }

    /// The whole trail's verification follows chains and heads on the server, a part of it by
    /// walking its chains: both name a row forged at a chain's end under a transaction that a
    /// checkpoint covers (beyond the head it recorded), and a head's row rewritten.
    @Test func aRowForgedBeyondItsChainsHeadIsNamedByTheWholeAndThePartialVerification() async throws {
        try await ScratchDatabase.withScratchDatabase(.migrated) { db in
            let queue = RevocationQueue(client: db.client, sealer: try Fixtures.sealer(), logger: Self.logger)
            let request = try await queue.enqueue(Fixtures.new("beyond"), actor: "t").request
            let other = try await queue.enqueue(Fixtures.new("rewritten"), actor: "t").request
            let (chain, otherChain) = (request.id.uuidString.lowercased(), other.id.uuidString.lowercased())
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let key = AuditSigningKey()
            try await Self.checkpointEverything(AuditCheckpoints(client: db.client, logger: Self.logger), verifier, key)
            let clean = try await verifier.verify(keys: [key.publicKey])
            #expect(clean.intact && clean.rowsChecked >= 2 && clean.chainsChecked >= 2, "\(clean.problems)")

            let forged: Int64 = 900_000
            try await db.client.withTransaction(logger: Self.logger) { connection in
                try await connection.query("SET LOCAL session_replication_role = replica", logger: Self.logger)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO revoker.audit_events (id, occurred_at, request_id, client_id, external_reference, event, actor,
                                recorded_by, chain_key, chain_seq, prev_hash, hash, txid)
                            SELECT \(forged), occurred_at, request_id, client_id, external_reference, 'cancelled', actor, recorded_by,
                                   chain_key, chain_seq + 1, hash, hash, txid
                            FROM revoker.audit_events WHERE chain_key = '\(chain)' ORDER BY chain_seq DESC LIMIT 1
                            """
                    ),
                    logger: Self.logger
                )
                try await connection.query(
                    PostgresQuery(unsafeSQL: "UPDATE revoker.audit_events e SET hash = revoker.audit_row_hash(e.prev_hash, e) WHERE id = \(forged)"),
                    logger: Self.logger
                )
                // Changed, then rehashed the database's own way: the row gives its hash again.
                let head = "chain_key = '\(otherChain)' AND chain_seq = (SELECT last_seq FROM revoker.audit_chains WHERE chain_key = '\(otherChain)')"
                for change in ["actor = 'someone else'", "hash = revoker.audit_row_hash(e.prev_hash, e)"] {
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "UPDATE revoker.audit_events e SET \(change) WHERE \(head)"),
                        logger: Self.logger
                    )
                }
            }
            let whole = try await verifier.verify(keys: [key.publicKey])
            let partial = try await verifier.verify(since: Date(timeIntervalSinceNow: -3600), keys: [key.publicKey])
            for found in [whole, partial] {
                #expect(
                    found.problems.contains {
                        $0.kind == .inserted && $0.chain == chain && $0.rows == [forged] && $0.message.contains("beyond the head it recorded")
                    },
                    "\(found.problems)"
                )
                #expect(
                    found.problems.contains { $0.kind == .changed && $0.chain == otherChain && $0.message.contains("not the one its head records") },
                    "\(found.problems)"
                )
                #expect(found.problems.contains { $0.kind == .checkpointMismatch }, "\(found.problems)")
            }
            #expect(whole.rowsChecked == clean.rowsChecked + 1 && whole.chainsChecked == clean.chainsChecked)
        }
    }
}
