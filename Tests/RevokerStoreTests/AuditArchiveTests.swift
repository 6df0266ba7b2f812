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
            let archiver = AuditArchiver(client: db.client, key: key, logger: Self.logger)
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
            _ = try await AuditArchiver(client: db.client, key: key, logger: Self.logger).archive(before: Self.firstDay(monthsAgo: 1), to: path)
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

    /// A writer whose transaction began before the archiver read the month commits a row into it
    /// while the archiver waits to drop it: the row is not dropped with the month.
    @Test func aRowCommittedIntoTheMonthsAfterTheReadsRefusesTheDrop() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            _ = try await Self.history(db, queue, key: key)
            let archiver = AuditArchiver(client: db.client, key: key, logger: Self.logger)
            let oldMonth = "audit_events_" + AuditPartitionTests.month(monthsAgo: 2)
            let late = UUID()
            let path = Self.file("late")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let refused: (any Error)? = try await db.client.withConnection { writer in
                try await writer.query("BEGIN", logger: Self.logger)
                try await writer.query("SET LOCAL revoker.history_clock = 'on'", logger: Self.logger)
                try await writer.query(
                    """
                    INSERT INTO revoker.audit_events (occurred_at, request_id, client_id, event, actor)
                    VALUES (\(Self.firstDay(monthsAgo: 1).addingTimeInterval(-60)), \(late), 'com.example.app', 'note', 'late')
                    """,
                    logger: Self.logger
                )
                async let archived: (any Error)? = {
                    do {
                        _ = try await archiver.archive(before: Self.firstDay(monthsAgo: 1), to: path)
                        return nil
                    } catch {
                        return error
                    }
                }()
                // The archiver has read the months once it waits for the writer's lock on them.
                try await eventually("the archiver waits for the writer") {
                    try await AuditPartitionTests.ints(
                        "SELECT count(*)::int FROM pg_locks WHERE NOT granted AND relation::regclass::text LIKE 'revoker.audit_events%'",
                        db
                    ) != [0]
                }
                try await writer.query("COMMIT", logger: Self.logger)
                return await archived
            }
            let error = try #require(refused as? RevokerStoreError, "the month was dropped with a row the file lacks")
            #expect(error.code == .conflict)
            #expect(error.message.contains("1 audit rows were committed"), "\(error.message)")
            #expect(!FileManager.default.fileExists(atPath: path), "a file short of a row is not left as an archive")
            #expect(try await AuditPartitionTests.ints("SELECT count(*)::int FROM pg_class WHERE relname = '\(oldMonth)'", db) == [1])
            #expect(try await AuditPartitionTests.ints("SELECT count(*)::int FROM revoker.audit_events WHERE request_id = '\(late)'", db) == [1])
            #expect(try await AuditPartitionTests.ints("SELECT count(*)::int FROM revoker.audit_archives", db) == [0])

            // Once a checkpoint covers it, the months archive with it.
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            _ = try await AuditChainTests.checkpointEverything(AuditCheckpoints(client: db.client, logger: Self.logger), verifier, key)
            let archived = try await archiver.archive(before: Self.firstDay(monthsAgo: 1), to: path)
            #expect(archived.rows == 14)
            let offline = try AuditArchive.verify(path: path, keys: [key.publicKey])
            #expect(offline.valid, "\(offline.problems)")
        }
    }

    /// The file as lines, and a copy of it with `change` applied.
    static func lines(_ path: String) throws -> [String] {
        var lines: [String] = []
        try GzipLineReader.forEachLine(path) { lines.append(String($0)) }
        return lines
    }

    static func write(_ lines: [String], name: String) throws -> String {
        let copy = file(name)
        let writer = try GzipLineWriter(path: copy)
        for line in lines { try writer.write(line) }
        _ = try writer.finish()
        return copy
    }

    static func decode(_ line: String) throws -> AuditArchive.Line {
        try JSONDecoder().decode(AuditArchive.Line.self, from: Data(line.utf8))
    }

    /// The last checkpoint cut from a file with its leaf lines and rows, and the end line
    /// recounted: `extent` says what the end line then carries.
    static func cutLastCheckpoint(_ lines: [String], extent: (AuditArchive.Extent) throws -> AuditArchive.Extent?) throws -> [String] {
        let decoded = try lines.map(decode)
        let last = try #require(decoded.last { $0.type == .checkpoint }?.checkpoint?.checkpoint)
        var kept: [String] = []
        var (rows, chains) = (0, Set<String>())
        for (text, line) in zip(lines, decoded) {
            switch line.type {
            case .checkpoint where line.checkpoint?.seq == last.seq: continue
            case .leaf where line.seq == last.seq: continue
            case .row:
                let row = try #require(line.row)
                if last.covers(row.txid) { continue }
                rows += 1
                chains.insert(row.chainKey)
                kept.append(text)
            case .end:
                var end = line
                (end.rows, end.chains) = (rows, chains.count)
                end.extent = try extent(try #require(line.extent))
                kept.append(try end.json())
            default: kept.append(text)
            }
        }
        return kept
    }

    /// Issue 37 (6): checkpoints sign only their own rows, so a file whose last checkpoint was cut
    /// with its rows and recounted verified. Its signed extent, and the trail's record, say what it held.
    @Test func anArchiveCutAtItsLastCheckpointAndRecountedDoesNotVerify() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            _ = try await Self.history(db, queue, key: key)
            let path = Self.file("whole")
            defer { try? FileManager.default.removeItem(atPath: path) }
            _ = try await AuditArchiver(client: db.client, key: key, logger: Self.logger).archive(before: Self.firstDay(monthsAgo: 1), to: path)
            let records = AuditArchiveRecords(client: db.client, logger: Self.logger)
            let whole = try AuditArchive.verify(path: path, keys: [key.publicKey])
            #expect(whole.valid && !whole.unsignedExtent, "\(whole.problems)")
            #expect(try await records.problems(of: whole, sha256: try AuditArchive.sha256(path: path)) == [])
            let recorded = try await AuditPartitionTests.ints(
                "SELECT first_checkpoint::int FROM revoker.audit_archives UNION ALL SELECT last_checkpoint::int FROM revoker.audit_archives",
                db
            )
            #expect(recorded.map(Int64.init) == [whole.extent?.firstCheckpoint, whole.extent?.lastCheckpoint].compactMap { $0 })
            let lines = try Self.lines(path)

            func check(_ name: String, _ lines: [String]) throws -> (AuditArchive.Verification, String) {
                let copy = try Self.write(lines, name: name)
                return (try AuditArchive.verify(path: copy, keys: [key.publicKey]), copy)
            }
            // The extent kept as signed: it names the checkpoint and rows cut.
            let (kept, keptCopy) = try check("cut-kept", try Self.cutLastCheckpoint(lines) { $0 })
            defer { try? FileManager.default.removeItem(atPath: keptCopy) }
            #expect(!kept.valid)
            #expect(kept.problems.contains { $0.contains("the signed extent says the last checkpoint") }, "\(kept.problems)")
            #expect(kept.problems.contains { $0.contains("the signed extent says rows 13; the file holds 9") }, "\(kept.problems)")
            // The extent dropped, or signed again by another key.
            let (dropped, droppedCopy) = try check("cut-dropped", try Self.cutLastCheckpoint(lines) { _ in nil })
            defer { try? FileManager.default.removeItem(atPath: droppedCopy) }
            #expect(dropped.problems.contains { $0.contains("carries no signed extent") }, "\(dropped.problems)")
            let other = AuditSigningKey()
            let recount = { (extent: AuditArchive.Extent, key: AuditSigningKey) in
                var extent = extent
                (extent.rows, extent.chains, extent.checkpoints) = (9, 3, extent.checkpoints - 1)
                (extent.lastCheckpoint, extent.lastCheckpointHash) = (extent.firstCheckpoint, extent.firstCheckpointHash)
                (extent.lastID, extent.leaves) = (nil, 0)
                return try extent.signed(with: key)
            }
            let (resigned, resignedCopy) = try check("cut-other-key", try Self.cutLastCheckpoint(lines) { try recount($0, other) })
            defer { try? FileManager.default.removeItem(atPath: resignedCopy) }
            #expect(resigned.problems.contains { $0.contains("not signed by a key given") }, "\(resigned.problems)")
            // Signed again with the audit key itself: the trail recorded the file written and its last checkpoint.
            let sameKey = try Self.cutLastCheckpoint(lines) { extent in
                var cut = try recount(extent, key)
                cut.lastID = try Self.cutLastCheckpoint(lines) { $0 }.compactMap { try? Self.decode($0).row?.id }.last
                return try cut.signed(with: key)
            }
            let (forged, forgedCopy) = try check("cut-same-key", sameKey)
            defer { try? FileManager.default.removeItem(atPath: forgedCopy) }
            #expect(forged.valid, "offline, a file signed again with the audit key passes: \(forged.problems)")
            let tied = try await records.problems(of: forged, sha256: try AuditArchive.sha256(path: forgedCopy))
            #expect(tied.contains { $0.contains("it is not the file written") }, "\(tied)")
            #expect(tied.contains { $0.contains("as archive") && $0.contains("'s last; the file's is") }, "\(tied)")
            #expect(tied.contains { $0.contains("rows 13") }, "\(tied)")

            // A file of the format before extents were signed: checked, but not taken as whole.
            let legacy = try lines.map { text in
                var line = try Self.decode(text)
                if line.type == .header { line.format = AuditArchive.unsignedExtentFormat }
                if line.type == .end { line.extent = nil }
                return try line.json()
            }
            let (old, oldCopy) = try check("legacy", legacy)
            defer { try? FileManager.default.removeItem(atPath: oldCopy) }
            #expect(old.valid && old.unsignedExtent, "\(old.problems)")
        }
    }

    /// The line bound refuses a bomb (RevokerEvidenceTests) and still reads a genuine archive
    /// whose row has every field at its limit, in the characters that JSON writes longest.
    @Test func anArchiveOfRowsWithEveryFieldAtItsLimitVerifies() async throws {
        try await Fixtures.withQueue { db, queue in
            let key = AuditSigningKey()
            _ = try await Self.history(db, queue, key: key)
            let wide = UUID()
            try await db.client.withTransaction(logger: Self.logger) { connection in
                try await connection.query("SET LOCAL revoker.history_clock = 'on'", logger: Self.logger)
                let (control, astral) = (String(repeating: "\u{1}", count: 500), String(repeating: "😀", count: 255))
                try await connection.query(
                    """
                    INSERT INTO revoker.audit_events (occurred_at, request_id, client_id, external_reference, apple_user_id, event, attempt,
                        actor, apple_endpoint, http_status, apple_error, apple_error_description, latency_ms, detail)
                    VALUES (\(Self.firstDay(monthsAgo: 1).addingTimeInterval(-7_200)), \(wide), \(astral), \(astral), \(astral), 'note',
                        2147483647, \(String(control.prefix(200))), \(String(control.prefix(200))), 599, \(String(control.prefix(100))),
                        \(control), 2147483647, \(control))
                    """,
                    logger: Self.logger
                )
            }
            let verifier = AuditVerifier(client: db.client, logger: Self.logger)
            _ = try await AuditChainTests.checkpointEverything(AuditCheckpoints(client: db.client, logger: Self.logger), verifier, key)
            let path = Self.file("wide")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let archived = try await AuditArchiver(client: db.client, key: key, logger: Self.logger).archive(
                before: Self.firstDay(monthsAgo: 1),
                to: path
            )
            #expect(archived.rows == 14)
            let longest = try Self.lines(path).map(\.utf8.count).max() ?? 0
            #expect(longest > 10_000, "the widest row's line is \(longest) bytes")
            let offline = try AuditArchive.verify(path: path, keys: [key.publicKey])
            #expect(offline.valid, "\(offline.problems)")
            let receipt = try AuditArchive.receipt(path: path, requestID: wide, key: key, issuedAtMicros: 0)
            #expect(receipt?.events.first?.row.detail == String(repeating: "\u{1}", count: 500))
        }
    }
}
