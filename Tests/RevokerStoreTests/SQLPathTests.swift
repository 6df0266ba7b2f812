import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// The SQL enqueue path after migration 0003: ciphertext only, registered apps only, the API's
/// character rules, and audit rows the database stamps itself.
@Suite("SQL enqueue path")
struct SQLPathTests {
    static let logger = Logger(label: "test")

    /// A position in the WAL: its segment file and the offset in it.
    struct WALPosition {
        var file: String
        var offset: Int
    }

    static func walPosition(_ db: ScratchDatabase) async throws -> WALPosition {
        let rows = try await db.client.query(
            "SELECT file_name, file_offset::int FROM pg_walfile_name_offset(pg_current_wal_insert_lsn())",
            logger: logger
        ).collect()
        let (file, offset) = try #require(try rows.first?.decode((String, Int).self))
        return WALPosition(file: file, offset: offset)
    }

    /// Creates a replication slot that keeps the WAL from now on: another test's CHECKPOINT
    /// could otherwise recycle the segment a scan starts in. Returns its name.
    static func retainWAL(_ db: ScratchDatabase) async throws -> String {
        let slot = "revoker_wal_probe_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        _ = try await db.client.query("SELECT pg_create_physical_replication_slot(\(slot), true)", logger: logger).collect()
        return slot
    }

    static func release(_ slot: String, _ db: ScratchDatabase) async throws {
        _ = try await db.client.query("SELECT pg_drop_replication_slot(\(slot))", logger: logger).collect()
    }

    /// The record bytes of the WAL between two positions, as a replica or a backup receives them,
    /// with the page headers taken out so that a record that crosses a page or a segment is
    /// contiguous.
    static func wal(_ db: ScratchDatabase, from start: WALPosition, to end: WALPosition) async throws -> [UInt8] {
        _ = try await db.client.query("CHECKPOINT", logger: logger).collect()
        let directory = try await db.client.query("SHOW data_directory", logger: logger).collect()
        let walDirectory = URL(fileURLWithPath: try #require(try directory.first?.decode(String.self))).appendingPathComponent("pg_wal")
        let block = 8192  // wal_block_size
        var records: [UInt8] = []
        let files = try FileManager.default.contentsOfDirectory(atPath: walDirectory.path)
            .filter { $0.count == 24 && $0 >= start.file && $0 <= end.file }.sorted()
        for file in files {
            let bytes = Array(try Data(contentsOf: walDirectory.appendingPathComponent(file)))
            let low = file == start.file ? start.offset : 0
            let high = file == end.file ? min(end.offset, bytes.count) : bytes.count
            var page = low / block * block
            while page < high {
                let header = page == 0 ? 40 : 24  // a segment's first page has the long header
                let from = max(low, page + header)
                let to = min(high, page + block)
                if from < to { records += bytes[from..<to] }
                page += block
            }
        }
        return records
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let bytes = Array(needle.utf8)
        guard let first = bytes.first, haystack.count >= bytes.count else { return false }
        var index = haystack.startIndex
        while let found = haystack[index...].firstIndex(of: first), found + bytes.count <= haystack.endIndex {
            if haystack[found..<found + bytes.count].elementsEqual(bytes) { return true }
            index = found + 1
        }
        return false
    }

    @Test func aCredentialEnqueuedInSQLIsCiphertextInTheTableAndTheWAL() async throws {
        try await Fixtures.withQueue { db, queue in
            let slot = try await Self.retainWAL(db)
            let start = try await Self.walPosition(db)
            let token = "r.plaintext-\(UUID().uuidString)"
            let probe = "wal-probe-\(UUID().uuidString)"
            _ = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'wal-1', 'refresh_token', \(token))",
                logger: Self.logger
            ).collect()
            // A value stored in plaintext, to show the WAL scan finds what is there.
            _ = try await db.client.query("CREATE TABLE public.wal_probe (t text)", logger: Self.logger).collect()
            _ = try await db.client.query("INSERT INTO public.wal_probe VALUES (\(probe))", logger: Self.logger).collect()

            let rows = try await db.client.query("SELECT credential, key_id, sealed FROM revoker.credential_intake", logger: Self.logger).collect()
            let (plaintext, keyID, sealed) = try #require(try rows.first?.decode((String?, String?, ByteBuffer?).self))
            #expect(plaintext == nil)
            #expect(keyID?.count == 16)
            let ciphertext = Array(try #require(sealed).readableBytesView)
            let plaintextInCiphertext = Self.contains(ciphertext, token)
            #expect(!plaintextInCiphertext)

            let end = try await Self.walPosition(db)
            let wal = try await Self.wal(db, from: start, to: end)
            try await Self.release(slot, db)
            // Booleans, so that a failure does not print the WAL.
            let probeFound = Self.contains(wal, probe)
            let tokenFound = Self.contains(wal, token)
            #expect(probeFound, "the scan reads the WAL (\(wal.count) bytes from \(start.file) to \(end.file))")
            #expect(!tokenFound, "the credential never reached the WAL in plaintext")

            let claimed = try await queue.claim(batch: 1, lease: .seconds(60), owner: "w")
            #expect(claimed.first?.credential.secret == token, "the worker's intake key opens it")
            let left = try await db.client.query("SELECT count(*)::int FROM revoker.credential_intake", logger: Self.logger).collect()
            #expect(try left.first?.decode(Int.self) == 0, "sealed with AES-GCM into the request at the claim")
        }
    }

    /// Custody keeps tokens for years: a grant registered from SQL (code or refresh token) or
    /// through the service (as `POST /v1/grants` does), taken into custody and then revoked by a
    /// deletion, never puts its code or token in the WAL in plaintext.
    @Test func registeredGrantsAreCiphertextInTheTableAndTheWAL() async throws {
        try await Fixtures.withQueue { db, queue in
            let slot = try await Self.retainWAL(db)
            let start = try await Self.walPosition(db)
            let secrets = (0..<4).map { "grant-secret-\($0)-\(UUID().uuidString)" }
            let probe = "wal-probe-\(UUID().uuidString)"
            try await db.client.withTransaction(logger: Self.logger) { connection in
                _ = try await connection.query(
                    "SELECT revoker.register_grant('apple', 'com.example.app', 'wal-account', 'authorization_code', \(secrets[0]))",
                    logger: Self.logger
                ).collect()
                _ = try await connection.query(
                    "SELECT revoker.register_grant('apple', 'com.example.app', 'wal-account', 'refresh_token', \(secrets[1]))",
                    logger: Self.logger
                ).collect()
            }
            let code = try NewGrant(
                clientID: "com.example.app",
                accountReference: "wal-account",
                credential: Credential(kind: .authorizationCode, secret: secrets[2])
            )
            let token = try NewGrant(
                clientID: "com.example.app",
                accountReference: "wal-account",
                credential: Credential(kind: .refreshToken, secret: secrets[3])
            )
            _ = try await queue.custody.register(code, actor: "test")
            _ = try await queue.custody.register(token, actor: "test")
            // A worker takes both refresh tokens into custody once the provider proved them, sealing
            // each in its grant; the SQL path's opens with the intake key.
            let claimed = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            let tokens = claimed.filter { $0.credential.kind == .refreshToken }
            #expect(Set(tokens.map(\.credential.secret)) == [secrets[1], secrets[3]], "the intake key opens the SQL path's")
            for item in tokens {
                #expect(
                    try await queue.custody.hold(
                        item.lease,
                        grantID: try #require(item.request.grantID),
                        token: item.credential,
                        verifiedUserID: nil
                    )
                )
            }
            _ = try await queue.deletions.request(accountReference: "wal-account", actor: "test")
            _ = try await db.client.query("CREATE TABLE public.wal_probe (t text)", logger: Self.logger).collect()
            _ = try await db.client.query("INSERT INTO public.wal_probe VALUES (\(probe))", logger: Self.logger).collect()

            let sealed = try await db.client.query(
                "SELECT sealed_token FROM revoker.grants WHERE sealed_token IS NOT NULL",
                logger: Self.logger
            ).collect().map { Array(try $0.decode(ByteBuffer.self).readableBytesView) }
            #expect(sealed.count == 2, "both refresh tokens held, sealed")
            let end = try await Self.walPosition(db)
            let wal = try await Self.wal(db, from: start, to: end)
            try await Self.release(slot, db)
            // Booleans, so that a failure does not print the WAL.
            let probeFound = Self.contains(wal, probe)
            let found = secrets.map { secret in Self.contains(wal, secret) || sealed.contains { Self.contains($0, secret) } }
            #expect(probeFound, "the scan reads the WAL (\(wal.count) bytes from \(start.file) to \(end.file))")
            #expect(found == [false, false, false, false], "no code or token reached the WAL in plaintext")
        }
    }

    @Test func withoutAPublishedIntakeKeyTheSQLPathRefusesAndStoresNothing() async throws {
        try await Fixtures.withQueue { db, _ in
            _ = try await db.client.query("DELETE FROM revoker.intake_keys", logger: Self.logger).collect()
            let error = await #expect(throws: PSQLError.self) {
                _ = try await db.client.query(
                    "SELECT revoker.enqueue_revocation('com.example.app', 'no-key', 'refresh_token', 'r.no-key')",
                    logger: Self.logger
                ).collect()
            }
            #expect(error?.serverInfo?[.sqlState] == "55000")
            #expect(error?.serverInfo?[.message]?.contains("intake key") == true)
            #expect(
                try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests", logger: Self.logger).collect().first?.decode(
                    Int.self
                ) == 0
            )
        }
    }

    @Test func onlyRegisteredAppsAreAcceptedAndTheListFollowsTheConfiguration() async throws {
        try await Fixtures.withQueue { db, queue in
            func enqueue(_ clientID: String, _ reference: String) async throws {
                _ = try await db.client.query(
                    "SELECT revoker.enqueue_revocation(\(clientID), \(reference), 'refresh_token', 'r.token')",
                    logger: Self.logger
                ).collect()
            }
            let error = await #expect(throws: PSQLError.self) { try await enqueue("com.example.unknown", "u-1") }
            #expect(error?.serverInfo?[.sqlState] == "22023")
            #expect(error?.serverInfo?[.message]?.hasPrefix("client_id") == true)

            try await queue.publishSQLIntake(clientIDs: ["com.example.app", "com.example.unknown"])
            try await enqueue("com.example.unknown", "u-1")
            try await queue.publishSQLIntake(clientIDs: ["com.example.unknown"])
            await #expect(throws: PSQLError.self) { try await enqueue("com.example.app", "a-1") }
            try await queue.publishSQLIntake(clientIDs: [String]())
            try await enqueue("com.example.unknown", "u-2")  // a process with no apps leaves the list alone
        }
    }

    @Test func theFunctionRefusesTheCharactersNewRevocationRefuses() throws {
        // One list, two languages: the migration's character classes are the Swift lists'.
        func render(_ ranges: [ClosedRange<UInt32>]) -> String {
            func escape(_ value: UInt32) -> String {
                let value = max(value, 1)  // NUL cannot occur in PostgreSQL text
                let hex = String(value, radix: 16)
                return value <= 0xFFFF
                    ? "\\\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    : "\\\\U" + String(repeating: "0", count: 8 - hex.count) + hex
            }
            return "E'[" + ranges.map { $0.count == 1 ? escape($0.lowerBound) : escape($0.lowerBound) + "-" + escape($0.upperBound) }.joined() + "]'"
        }
        let migration = try #require(Migration.all.first { $0.version == 3 }).sql
        #expect(migration.contains("v_refused  constant text := \(render(NewRevocation.refusedCharacters));"))
        #expect(migration.contains("v_edge     constant text := \(render(NewRevocation.edgeWhiteSpace));"))
    }

    @Test func theDatabaseStampsAuditRowsWhateverAnInsertSays() async throws {
        try await Fixtures.withQueue { db, _ in
            let rows = try await db.client.query(
                """
                INSERT INTO revoker.audit_events (id, occurred_at, event, actor, detail)
                VALUES (987654321, date_trunc('month', now(), 'UTC'), 'note', 'operator:alice', 'forged?')
                RETURNING id, occurred_at, recorded_by, session_user::text
                """,
                logger: Self.logger
            ).collect()
            let (id, occurredAt, recordedBy, role) = try #require(try rows.first?.decode((Int64, Date, String?, String).self))
            #expect(id != 987_654_321, "the id comes from the sequence")
            #expect(abs(occurredAt.timeIntervalSinceNow) < 300, "the time is the database's")
            #expect(recordedBy == role, "the writing role is recorded")
            // A time of another month is not stamped over but refused (the trail is partitioned
            // by month, migration 0020): no partition for it, or the trigger's refusal.
            await #expect(throws: PSQLError.self) {
                _ = try await db.client.query(
                    "INSERT INTO revoker.audit_events (occurred_at, event, actor) VALUES ('2001-01-01T00:00:00Z', 'note', 'operator:alice')",
                    logger: Self.logger
                ).collect()
            }

            let error = await #expect(throws: PSQLError.self) {
                _ = try await db.client.query(
                    "INSERT INTO revoker.audit_events (event, actor) VALUES ('note', 'sql:app_backend')",
                    logger: Self.logger
                ).collect()
            }
            #expect(error?.serverInfo?[.sqlState] == "42501", "an actor may not name another database role")
        }
    }
}
