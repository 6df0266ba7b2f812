import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerStore
import Testing

@testable import RevokerLocalStack
@testable import RevokerTesting

/// The second security review's findings on the evidence (issue 24): a signer that extended
/// whatever the table held, checkpoints held back by any open transaction, and a scoped
/// verification blind to rows moved out of its scope.
@Suite struct AuditWitnessTests {
    static let logger = Logger(label: "test")

    /// Runs `statements` as the database's owner, in one transaction with the triggers off.
    static func asOwner(_ db: ScratchDatabase, _ statements: [String]) async throws {
        try await db.client.withTransaction(logger: logger) { connection in
            _ = try await connection.query("SET LOCAL session_replication_role = replica", logger: logger).collect()
            for sql in statements { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect() }
        }
    }

    /// The feed's events of `type` once `count` of them are readable (an open transaction
    /// anywhere on the server holds the feed back for a while).
    static func events(_ type: String, count: Int, _ db: ScratchDatabase) async throws -> [OutboxEvent] {
        let feed = EventFeed(client: db.client, logger: logger)
        try await eventually("\(count) \(type) event(s) readable") {
            try await feed.events(after: nil, limit: 1000).filter { $0.type == type }.count >= count
        }
        return try await feed.events(after: nil, limit: 1000).filter { $0.type == type }
    }

    static func one<T: PostgresDecodable>(_ sql: String, _ db: ScratchDatabase, as type: T.Type) async throws -> T {
        try #require(try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect().first?.decode(T.self))
    }

    /// A finished request's chain whose outcome the owner rewrites, hashes and head recomputed,
    /// after removing every checkpoint: what the review did within a minute of `serve`.
    static func rewriteHistory(of chain: String, _ db: ScratchDatabase) async throws {
        try await asOwner(
            db,
            [
                "DELETE FROM revoker.audit_checkpoints",
                "UPDATE revoker.audit_events SET detail = 'outcome=already_invalid' WHERE chain_key = '\(chain)' AND event = 'cancelled'",
                AuditTampering.rehashChain(chain),
            ]
        )
    }

    @Test func aSignerRefusesToSignOverARewrittenHistoryAndTheWitnessShowsIt() async throws {
        try await Fixtures.withQueue { db, queue in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-witness-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let witness = directory.appendingPathComponent("witness.jsonl").path
            let key = AuditSigningKey()
            let signer = try AuditSigner(key: key, trustedKeys: [], witnessPath: witness)
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let request = try await queue.enqueue(Fixtures.new("user-rewritten"), actor: "t").request
            _ = try await queue.cancel(id: request.id, actor: "ops")
            let signed = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, signer))
            #expect(try AuditWitness.read(witness).last == signed)

            try await Self.rewriteHistory(of: request.id.uuidString.lowercased(), db)
            _ = try await queue.enqueue(Fixtures.new("user-after"), actor: "t")
            // Without a witness or a memory, the whole rewritten trail verifies.
            #expect(try await verifier.verify(keys: [key.publicKey]).intact)

            // The signer that signed before refuses; so does a new one that reads the witness.
            await #expect(throws: RevokerStoreError.self) { try await checkpoints.take(signer: signer) }
            #expect(signer.refusal?.code == "checkpoint_missing")
            let restarted = try AuditSigner(key: key, trustedKeys: [], witnessPath: witness)
            #expect(restarted.lastKnown == signed)
            await #expect(throws: RevokerStoreError.self) { try await checkpoints.take(signer: restarted) }
            #expect(try await checkpoints.all().isEmpty)

            // The refusal is recorded and published to every app.
            try await checkpoints.recordRefusal(try #require(signer.refusal), actor: "revoker")
            let refused = try await Self.events("audit.checkpoint_refused", count: 1, db)
            #expect(refused.map(\.clientID) == ["com.example.app"])
            #expect(refused.first?.errorCode == "checkpoint_missing")

            // A signer that knows nothing (no witness) signs over it; the witness still tells.
            let unaware = try AuditSigner(key: key, trustedKeys: [])
            #expect(try await AuditChainTests.checkpointEverything(checkpoints, verifier, unaware) != nil)
            let result = try await verifier.verify(keys: [key.publicKey], witnessed: try AuditWitness.read(witness))
            #expect(!result.intact)
            #expect(result.problems.contains { $0.kind == .witnessMismatch && $0.message.contains("rewritten") }, "\(result.problems)")
        }
    }

    @Test func checkpointsAreEventsAndAWitnessFindsTheNewestCheckpointsRemovedWithTheirRows() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let signer = try AuditSigner(key: key, trustedKeys: [])
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            _ = try await queue.enqueue(Fixtures.new("user-1"), actor: "t")
            let first = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, signer))
            _ = try await queue.enqueue(Fixtures.new("user-2"), actor: "t")
            let second = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, signer))

            // The app backend holds every checkpoint from the feed, exactly as signed.
            let events = try await Self.events("audit.checkpoint", count: Int(second.seq), db)
            #expect(events.allSatisfy { $0.clientID == "com.example.app" })
            let held = try AuditWitness.checkpoints(in: Data(("[" + events.map(\.json).joined(separator: ",") + "]").utf8), source: "the feed")
            #expect(held.map(\.seq) == (try await checkpoints.all()).map(\.seq))
            #expect(held.last == second)
            #expect(held.allSatisfy { $0.isSigned(byOneOf: [key.publicKey]) })

            // The newest checkpoint removed with the rows after the first: still a valid trail.
            try await Self.asOwner(
                db,
                [
                    "DELETE FROM revoker.audit_events WHERE txid >= '\(first.txidTo)'::xid8",
                    "DELETE FROM revoker.audit_checkpoints WHERE seq > \(first.seq)",
                    "DELETE FROM revoker.audit_chains c WHERE NOT EXISTS (SELECT 1 FROM revoker.audit_events e WHERE e.chain_key = c.chain_key)",
                ]
            )
            #expect(try await verifier.verify(keys: [key.publicKey]).intact)
            let witnessed = try await verifier.verify(keys: [key.publicKey], witnessed: held)
            #expect(
                witnessed.problems.contains { $0.kind == .witnessMismatch && $0.message.contains("checkpoint \(second.seq),") },
                "\(witnessed.problems)"
            )
            #expect(witnessed.witnessedCheckpoints == held.count)
        }
    }

    @Test func aScopedVerificationFindsRowsMovedOutOfItsScope() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let moved = try await queue.enqueue(Fixtures.new("user-moved"), actor: "t").request
            let dated = try await queue.enqueue(Fixtures.new("user-dated"), actor: "t").request
            _ = try await queue.enqueue(Fixtures.new("user-stays"), actor: "t")
            let signed = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
            let since = signed.createdAt.addingTimeInterval(-30)
            #expect(try await verifier.verify(since: since, clientID: "com.example.app", keys: [key.publicKey]).intact)

            try await Self.asOwner(
                db,
                [
                    "UPDATE revoker.audit_events SET client_id = 'com.example.other' WHERE request_id = '\(moved.id)'",
                    "UPDATE revoker.audit_events SET occurred_at = occurred_at - interval '2 days' WHERE request_id = '\(dated.id)'",
                ]
            )
            let movedID = try await Self.one("SELECT min(id) FROM revoker.audit_events WHERE request_id = '\(moved.id)'", db, as: Int64.self)
            let datedID = try await Self.one("SELECT min(id) FROM revoker.audit_events WHERE request_id = '\(dated.id)'", db, as: Int64.self)
            let scoped = try await verifier.verify(since: since, clientID: "com.example.app", keys: [key.publicKey])
            #expect(!scoped.intact)
            #expect(scoped.problems.contains { $0.kind == .changed && $0.rows == [movedID] }, "\(scoped.problems)")
            #expect(scoped.problems.contains { $0.kind == .changed && $0.rows == [datedID] }, "\(scoped.problems)")
            // And the whole trail agrees.
            #expect(!(try await verifier.verify(keys: [key.publicKey]).intact))
        }
    }

    @Test func aTransactionHeldOpenNoLongerStallsCheckpointsAndIsReported() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let signer = try AuditSigner(key: key, trustedKeys: [])
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let request = try await queue.enqueue(Fixtures.new("user-open"), actor: "t").request
            let (opened, openedContinuation) = AsyncStream.makeStream(of: UInt64.self)
            let (finish, finishContinuation) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // An auditor's idle transaction, with a transaction id, that then writes a row.
                group.addTask {
                    try await db.client.withConnection { connection in
                        _ = try await connection.query("BEGIN", logger: Self.logger).collect()
                        let xid = try #require(
                            try await connection.query("SELECT pg_current_xact_id()::text", logger: Self.logger).collect().first?.decode(String.self)
                        )
                        openedContinuation.yield(try #require(UInt64(xid)))
                        for await _ in finish { break }
                        _ = try await connection.query(
                            "INSERT INTO revoker.audit_events (request_id, client_id, event, actor, detail) VALUES (\(request.id), 'com.example.app', 'note', 'sql:postgres', 'late')",
                            logger: Self.logger
                        ).collect()
                        _ = try await connection.query("COMMIT", logger: Self.logger).collect()
                    }
                }
                var iterator = opened.makeAsyncIterator()
                let xid = try #require(await iterator.next())
                _ = try await queue.enqueue(Fixtures.new("user-meanwhile"), actor: "t")

                // What ended is covered at once; the open transaction is listed and reported.
                let covered = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, signer))
                #expect(covered.openTxids.contains(xid))
                let open = try await checkpoints.openTransactions()
                let holder = try #require(open.first { $0.txid == xid })
                #expect(holder.state == "idle in transaction")
                #expect(holder.pid != nil && holder.role != nil && holder.ageSeconds != nil)
                #expect(holder.summary.contains("transaction \(xid)"))

                finishContinuation.yield()
                finishContinuation.finish()
                try await group.waitForAll()
                // Its row, written after the checkpoint, is taken late by the next one.
                let late = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, signer))
                // (Other databases' transactions that ended between the snapshot and the look at who
                // runs where may be listed open and then late too: they wrote nothing here.)
                #expect(late.lateTxids.contains(xid))
                #expect(late.covers(xid) && !covered.covers(xid))
                let result = try await verifier.verify(keys: [key.publicKey])
                #expect(result.intact, "\(result.problems)")
                #expect(result.rowsNotYetCheckpointed == 0)

                // A receipt proves the late row into the checkpoint that took it.
                let receipt = try #require(
                    try await AuditReceipts(client: db.client, logger: Self.logger).issue(requestID: request.id, signer: signer)
                )
                let check = AuditReceipt.verify(try receipt.canonicalBytes(), keys: [key.publicKey])
                #expect(check.valid, "\(check.problems)")
                #expect(receipt.events.last?.checkpoint == late.seq)
            }
        }
    }

    @Test func aCheckpointSignedByAKeyNotGivenLeavesItsRowsNotVerifiable() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            _ = try await queue.enqueue(Fixtures.new("user-relabelled"), actor: "t")
            let signed = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
            try await Self.asOwner(db, ["UPDATE revoker.audit_checkpoints SET key_id = '0123456789abcdef' WHERE seq = \(signed.seq)"])
            let result = try await verifier.verify(keys: [key.publicKey])
            #expect(!result.verifiable)
            #expect(result.rowsNotProven == Int(signed.rowCount))
            #expect(result.text.contains("NOT VERIFIABLE"))
            #expect(result.problems.allSatisfy { $0.kind == .unknownKey })
        }
    }
}
