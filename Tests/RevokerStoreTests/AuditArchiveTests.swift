import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerLocalStack
@_spi(History) import RevokerStore
import RevokerTesting
import Testing

/// `revoker audit archive` (migration 0022): months written to a file that verifies offline,
/// then dropped, with the live trail still verifying and receipts from either.
@Suite("Audit archive")
struct AuditArchiveTests {
    static let logger = Logger(label: "test")

    static func firstDay(monthsAgo: Int) -> Date {
        AuditArchiver.month(AuditPartitionTests.month(monthsAgo: monthsAgo).replacingOccurrences(of: "_", with: "-"))!
    }

    static func file(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("revoker-archive-\(UUID().uuidString)-\(name).jsonl.gz").path
    }

    /// Three months of history as the service would have written and signed it: requests of two
    /// months ago under a checkpoint of their own (A); chains that run from the end of that month
    /// into the next one or into this one, under a checkpoint of both months (B); this month's.
    static func history(_ db: ScratchDatabase, _ queue: RevocationQueue, key: AuditSigningKey) async throws -> [String: UUID] {
        let verifier = AuditVerifier(client: db.client, logger: logger)
        let checkpoints = AuditCheckpoints(client: db.client, logger: logger)
        let signer = try AuditSigner(key: key, trustedKeys: [])
        _ = try await db.client.query("SELECT revoker.audit_add_partitions(now() - interval '2 months', now())").collect()
        var requests: [String: UUID] = [:]
        for name in ["old-1", "old-2", "old-3"] {
            requests[name] = UUID()
            // old-1's rows name two users: the id given, then an identity token's subject.
            let users = name == "old-1" ? ["user-given", "user-verified"] : []
            try await AuditPartitionTests.writeEarlier(requests[name]!, monthsAgo: 2, rows: 3, userIDs: users, db)
        }
        _ = try #require(try await checkpoints.take(signer: signer, backdatedTo: firstDay(monthsAgo: 1).addingTimeInterval(-3_600)))
        for name in ["across", "two-months"] {
            requests[name] = UUID()
            try await AuditPartitionTests.writeEarlier(requests[name]!, monthsAgo: 2, rows: 2, beforeMonthEnd: "30 minutes", db)
        }
        requests["last-month"] = UUID()
        try await AuditPartitionTests.writeEarlier(requests["last-month"]!, monthsAgo: 1, rows: 4, db)
        try await AuditPartitionTests.writeEarlier(
            requests["two-months"]!,
            monthsAgo: 1,
            rows: 1,
            continuing: true,
            userIDs: ["user-later"],
            db
        )
        _ = try #require(try await checkpoints.take(signer: signer, backdatedTo: firstDay(monthsAgo: 0).addingTimeInterval(-3_600)))
        try await db.client.query(
            "INSERT INTO revoker.audit_events (request_id, client_id, event, actor) VALUES (\(requests["across"]!), 'com.example.app', 'note', 't')"
        )
        requests["now"] = try await queue.enqueue(Fixtures.new("now"), actor: "t").request.id
        _ = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
        return requests
    }

    @Test func archiveVerifyDropVerifyAndReceiptsFromTheFileAndTheDatabase() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            let requests = try await Self.history(db, queue, key: key)
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            let checkpoints = AuditCheckpoints(client: db.client, logger: Self.logger)
            let archiver = AuditArchiver(client: db.client, logger: Self.logger)
            #expect(try await verifier.verify(keys: [key.publicKey]).intact)
            let total = try await AuditPartitionTests.ints("SELECT count(*)::int FROM revoker.audit_events", db)[0]

            // The oldest month: 3 × 3 rows, and 2 of each chain that goes on.
            let first = Self.file("first")
            defer { try? FileManager.default.removeItem(atPath: first) }
            let archived = try await archiver.archive(before: Self.firstDay(monthsAgo: 1), to: first)
            #expect(archived.rows == 13)
            #expect(archived.months == [AuditPartitionTests.month(monthsAgo: 2).replacingOccurrences(of: "_", with: "-")])
            let offline = try AuditArchive.verify(path: first, keys: [key.publicKey])
            #expect(offline.valid, "\(offline.problems)")
            #expect(offline.rows == 13)
            // A (all archived) and B (split: its rows of last month stay).
            #expect(offline.checkpoints == 2)
            let left = try await AuditPartitionTests.ints(
                "SELECT count(*)::int FROM revoker.audit_events WHERE event <> 'note' OR actor <> 'revoker'",
                db
            )
            #expect(left == [total - 13])
            let oldMonth = "revoker.audit_events_" + AuditPartitionTests.month(monthsAgo: 2)
            #expect(try await AuditPartitionTests.ints("SELECT count(*)::int FROM pg_class WHERE oid = to_regclass('\(oldMonth)')", db) == [0])
            // The search finds archived requests by what the archive kept, and says where they are.
            let search = AuditRequests(client: db.client, logger: Self.logger)
            let oldOnes = try await search.search(AuditRequestSearch(externalReference: "old"))
            #expect(oldOnes.requests.count == 6)
            let firstName = URL(fileURLWithPath: first).lastPathComponent
            #expect(oldOnes.requests.filter { $0.archive == firstName }.count == 5)
            #expect(oldOnes.requests.filter { $0.archive == nil }.map(\.requestID) == [requests["last-month"]])
            // By any user id its rows named, archived or still here.
            for (user, name) in [("user-given", "old-1"), ("user-verified", "old-1"), ("user-later", "two-months")] {
                let found = try await search.search(AuditRequestSearch(userID: user))
                #expect(found.requests.map(\.requestID) == [requests[name]], "\(user)")
                #expect(found.requests.first?.archive == firstName, "\(user)")
            }
            let live = try await search.search(AuditRequestSearch(externalReference: "now"))
            #expect(live.requests.map(\.archive) == [nil])
            var pages: [UUID] = []
            var cursor: String?
            repeat {
                let page = try await search.search(AuditRequestSearch(cursor: cursor, limit: 2))
                pages += page.requests.map(\.requestID)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(Set(pages) == Set(requests.values) && pages.count == requests.count, "every request once, live or archived")
            #expect(try await search.archive(of: try #require(requests["old-3"]))?.file == firstName)
            #expect(try await search.archive(of: try #require(requests["last-month"])) == nil)
            // Its month cannot come back, nor can a month before it.
            await #expect(throws: PSQLError.self) {
                try await db.client.query("SELECT revoker.audit_add_partitions(now() - interval '3 months', now())").collect()
            }

            // The live trail verifies from the heads the archive recorded, and goes on from them.
            let afterFirst = try await verifier.verify(keys: [key.publicKey])
            #expect(afterFirst.intact, "\(afterFirst.problems)")
            let old = try #require(requests["old-1"])
            try await db.client.query(
                "INSERT INTO revoker.audit_events (request_id, client_id, event, actor) VALUES (\(old), 'com.example.app', 'note', 't')"
            )
            #expect(try await AuditPartitionTests.ints("SELECT chain_seq::int FROM revoker.audit_events WHERE request_id = '\(old)'", db) == [4])
            _ = try #require(try await AuditChainTests.checkpointEverything(checkpoints, verifier, key))
            let continued = try await verifier.verify(keys: [key.publicKey])
            #expect(continued.intact, "\(continued.problems)")

            // A receipt from the file, for a request all archived, verifies offline; one from the
            // database, for a request under a checkpoint the archive split, too.
            let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let (old2, lastMonth, nowRequest) = (try #require(requests["old-2"]), try #require(requests["last-month"]), try #require(requests["now"]))
            let fromFile = try #require(
                try AuditArchive.receipt(path: first, requestID: old2, key: key, issuedAtMicros: now)
            )
            #expect(fromFile.events.count == 3)
            #expect(AuditReceipt.verify(try fromFile.canonicalBytes(), keys: [key.publicKey]).valid)
            let signer = try AuditSigner(key: key, trustedKeys: [])
            let fromDatabase = try #require(
                try await AuditReceipts(client: db.client, logger: Self.logger).issue(requestID: lastMonth, signer: signer)
            )
            #expect(AuditReceipt.verify(try fromDatabase.canonicalBytes(), keys: [key.publicKey]).valid)
            #expect(try AuditArchive.receipt(path: first, requestID: nowRequest, key: key, issuedAtMicros: now) == nil)

            // The next month: a chain of both months starts from the first archive's last row of it.
            let second = Self.file("second")
            defer { try? FileManager.default.removeItem(atPath: second) }
            let next = try await archiver.archive(before: Self.firstDay(monthsAgo: 0), to: second)
            #expect(next.rows == 5)
            let secondOffline = try AuditArchive.verify(path: second, keys: [key.publicKey])
            #expect(secondOffline.valid, "\(secondOffline.problems)")
            let afterSecond = try await verifier.verify(keys: [key.publicKey])
            #expect(afterSecond.intact, "\(afterSecond.problems)")
            // This month cannot be archived, nor a file written over.
            await #expect(throws: RevokerStoreError.self) {
                _ = try await archiver.archive(before: Self.firstDay(monthsAgo: -1), to: Self.file("third"))
            }
            await #expect(throws: RevokerStoreError.self) {
                _ = try await archiver.archive(before: Self.firstDay(monthsAgo: 0), to: second)
            }
            let archives = try await AuditPartitionTests.ints("SELECT row_count::int FROM revoker.audit_archives ORDER BY id", db)
            #expect(archives == [13, 5])
            // The recorded end of an archived chain rewritten: its live rows no longer follow it.
            let across = try #require(requests["across"]).uuidString.lowercased()
            try await db.client.query(
                PostgresQuery(unsafeSQL: "UPDATE revoker.audit_chains SET archived_hash = sha256('x'::bytea) WHERE chain_key = '\(across)'")
            )
            let rewritten = try await verifier.verify(keys: [key.publicKey])
            #expect(rewritten.problems.contains { $0.chain == across && $0.message.contains("archived") }, "\(rewritten.problems)")
        }
    }

    @Test func aChangedOrShortenedArchiveOrAnotherKeyIsCaught() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            _ = try await Self.history(db, queue, key: key)
            let path = Self.file("tamper")
            defer { try? FileManager.default.removeItem(atPath: path) }
            _ = try await AuditArchiver(client: db.client, logger: Self.logger).archive(before: Self.firstDay(monthsAgo: 1), to: path)
            var lines: [String] = []
            try GzipLineReader.forEachLine(path) { lines.append(String($0)) }
            #expect(try AuditArchive.verify(path: path, keys: [key.publicKey]).valid)
            #expect(!(try AuditArchive.verify(path: path, keys: [AuditSigningKey().publicKey]).valid))

            func rewritten(_ change: ([String]) -> [String]) throws -> AuditArchive.Verification {
                let copy = Self.file("copy")
                defer { try? FileManager.default.removeItem(atPath: copy) }
                let writer = try GzipLineWriter(path: copy)
                for line in change(lines) { try writer.write(line) }
                _ = try writer.finish()
                return try AuditArchive.verify(path: copy, keys: [key.publicKey])
            }
            // A row's actor changed.
            let row = try #require(lines.firstIndex { $0.contains("\"type\":\"row\"") })
            let changed = try rewritten { lines in
                var lines = lines
                lines[row] = lines[row].replacingOccurrences(of: "\"actor\":\"t\"", with: "\"actor\":\"x\"")
                return lines
            }
            #expect(!changed.valid)
            #expect(changed.problems.contains { $0.contains("changed") }, "\(changed.problems)")
            // A row removed.
            let removed = try rewritten { lines in lines.enumerated().filter { $0.offset != row }.map(\.element) }
            #expect(!removed.valid)
            // Cut short.
            let short = try rewritten { Array($0.dropLast(2)) }
            #expect(short.problems.contains { $0.contains("truncated") }, "\(short.problems)")
            // Not an archive at all.
            let notGzip = Self.file("plain")
            defer { try? FileManager.default.removeItem(atPath: notGzip) }
            FileManager.default.createFile(atPath: notGzip, contents: Data(lines.joined(separator: "\n").utf8))
            #expect(throws: AuditEvidenceError.self) { try AuditArchive.verify(path: notGzip, keys: [key.publicKey]) }
        }
    }
}
