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

    /// WAL segments written since `start`, as bytes: what a replica or a backup receives.
    static func recentWAL(_ db: ScratchDatabase, since start: Date) async throws -> [[UInt8]] {
        _ = try await db.client.query("CHECKPOINT", logger: logger).collect()
        let rows = try await db.client.query("SHOW data_directory", logger: logger).collect()
        let directory = URL(fileURLWithPath: try #require(try rows.first?.decode(String.self))).appendingPathComponent("pg_wal")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.count == 24 }
        return try names.compactMap { name in
            let file = directory.appendingPathComponent(name)
            let modified = try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date
            guard let modified, modified >= start.addingTimeInterval(-2) else { return nil }
            return Array(try Data(contentsOf: file))
        }
    }

    static func contains(_ haystack: [[UInt8]], _ needle: String) -> Bool {
        let bytes = Array(needle.utf8)
        return haystack.contains { segment in
            guard segment.count >= bytes.count else { return false }
            var index = segment.startIndex
            while let found = segment[index...].firstIndex(of: bytes[0]), found + bytes.count <= segment.endIndex {
                if segment[found..<found + bytes.count].elementsEqual(bytes) { return true }
                index = found + 1
            }
            return false
        }
    }

    @Test func aCredentialEnqueuedInSQLIsCiphertextInTheTableAndTheWAL() async throws {
        try await Fixtures.withQueue { db, queue in
            let start = Date()
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
            #expect(!Self.contains([ciphertext], token))

            let wal = try await Self.recentWAL(db, since: start)
            #expect(Self.contains(wal, probe), "the scan reads the WAL (\(wal.count) segments)")
            #expect(!Self.contains(wal, token), "the credential never reached the WAL in plaintext")

            let claimed = try await queue.claim(batch: 1, lease: .seconds(60), owner: "w")
            #expect(claimed.first?.credential.secret == token, "the worker's intake key opens it")
            let left = try await db.client.query("SELECT count(*)::int FROM revoker.credential_intake", logger: Self.logger).collect()
            #expect(try left.first?.decode(Int.self) == 0, "sealed with AES-GCM into the request at the claim")
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
                VALUES (987654321, '2001-01-01T00:00:00Z', 'note', 'operator:alice', 'forged?')
                RETURNING id, occurred_at, recorded_by, session_user::text
                """,
                logger: Self.logger
            ).collect()
            let (id, occurredAt, recordedBy, role) = try #require(try rows.first?.decode((Int64, Date, String?, String).self))
            #expect(id != 987_654_321, "the id comes from the sequence")
            #expect(abs(occurredAt.timeIntervalSinceNow) < 300, "the time is the database's")
            #expect(recordedBy == role, "the writing role is recorded")

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
