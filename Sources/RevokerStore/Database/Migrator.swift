import Crypto
import Foundation
import Logging
import PostgresNIO

/// Applies the embedded migrations.
///
/// `migrate()` holds a session advisory lock while it works, so several instances starting
/// at once apply each migration exactly once. Each migration runs in its own transaction and
/// is recorded in `revoker.schema_migrations` with its checksum. It refuses to run when an
/// applied migration's checksum differs from the embedded file, or when the database has
/// migrations this binary does not know.
public struct Migrator: Sendable {
    /// Advisory lock key (`hashtext('revoker.migrations')` would vary; this is fixed).
    static let lockKey: Int64 = 0x5245_564F_4B45_5231  // "REVOKER1"

    let client: PostgresClient
    let migrations: [Migration]
    let logger: Logger

    /// Creates a migrator for the built-in migrations.
    public init(client: PostgresClient, logger: Logger, migrations: [Migration] = Migration.all) {
        self.client = client
        self.logger = logger
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Applies every pending migration; returns the versions it applied.
    @discardableResult
    public func migrate(logger: Logger? = nil) async throws -> [Int] {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await connection.run("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
                do {
                    let applied = try await self.apply(on: connection)
                    try await connection.run("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                    return applied
                } catch {
                    // Closing is the only safe way to drop a session lock after an unknown failure.
                    _ = try? await connection.run("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                    throw error
                }
            }
        }
    }

    /// Migrations not yet applied (empty when the schema is current).
    public func pendingMigrations() async throws -> [Migration] {
        let applied = try await self.appliedMigrations()
        try self.verify(applied)
        return self.migrations.filter { applied[$0.version] == nil }
    }

    /// Whether all embedded migrations are applied with matching checksums.
    public func isCurrent() async throws -> Bool {
        do {
            return try await self.pendingMigrations().isEmpty
        } catch let error as RevokerStoreError where error.code == .migrationChecksumMismatch || error.code == .unknownMigration {
            return false
        }
    }

    struct Applied {
        var name: String
        var checksum: String?
    }

    func appliedMigrations() async throws -> [Int: Applied] {
        try await StoreDatabase.run(self.logger) {
            let exists = try await self.client.query(
                "SELECT to_regclass('revoker.schema_migrations') IS NOT NULL",
                logger: self.logger
            ).collect()
            guard try exists.first?.decode(Bool.self) == true else { return [:] }
            var applied: [Int: Applied] = [:]
            let rows = try await self.client.query(
                "SELECT version, name, checksum FROM revoker.schema_migrations",
                logger: self.logger
            ).collect()
            for row in rows {
                let (version, name, checksum) = try row.decode((Int, String, String?).self)
                applied[version] = Applied(name: name, checksum: checksum)
            }
            return applied
        }
    }

    func verify(_ applied: [Int: Applied]) throws {
        let known = Dictionary(uniqueKeysWithValues: self.migrations.map { ($0.version, $0) })
        for (version, record) in applied.sorted(by: { $0.key < $1.key }) {
            guard let migration = known[version] else {
                throw RevokerStoreError(
                    .unknownMigration,
                    "the database has migration \(version) (\(record.name)), which this binary does not know; it is older than the schema"
                )
            }
            if let checksum = record.checksum, checksum != migration.checksum {
                throw RevokerStoreError(
                    .migrationChecksumMismatch,
                    "migration \(migration.name) changed after it was applied (checksum differs); write a new migration instead"
                )
            }
        }
    }

    private func apply(on connection: PostgresConnection) async throws -> [Int] {
        try await connection.run("CREATE SCHEMA IF NOT EXISTS revoker", logger: self.logger)
        try await connection.run(
            """
            CREATE TABLE IF NOT EXISTS revoker.schema_migrations (
                version integer PRIMARY KEY, name text NOT NULL, checksum text,
                applied_at timestamptz NOT NULL DEFAULT now())
            """,
            logger: self.logger
        )
        var applied: [Int: Applied] = [:]
        for row in try await connection.query("SELECT version, name, checksum FROM revoker.schema_migrations", logger: self.logger).collect() {
            let (version, name, checksum) = try row.decode((Int, String, String?).self)
            applied[version] = Applied(name: name, checksum: checksum)
        }
        try self.verify(applied)

        var done: [Int] = []
        for migration in self.migrations {
            if let record = applied[migration.version] {
                if record.checksum == nil {
                    // Applied by psql: adopt it with the embedded file's checksum.
                    try await connection.run(
                        "UPDATE revoker.schema_migrations SET checksum = \(migration.checksum) WHERE version = \(migration.version)",
                        logger: self.logger
                    )
                    self.logger.notice("Adopted migration applied outside the binary", metadata: ["revoker.migration": "\(migration.name)"])
                }
                continue
            }
            self.logger.notice("Applying migration", metadata: ["revoker.migration": "\(migration.name)"])
            do {
                try await connection.withTransaction(logger: self.logger) { connection in
                    for statement in SQLStatementSplitter.split(migration.sql) {
                        try await connection.run(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                    }
                    try await connection.run(
                        """
                        INSERT INTO revoker.schema_migrations (version, name, checksum)
                        VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                        ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()
                        """,
                        logger: self.logger
                    )
                }
            } catch {
                let mapped = StoreDatabase.map(error)
                let detail = (mapped as? RevokerStoreError)?.detail
                throw RevokerStoreError(.migrationFailed, "migration \(migration.name) failed", detail: detail)
            }
            done.append(migration.version)
        }
        return done
    }
}

/// Splits a SQL script into statements at top-level semicolons, respecting quotes, quoted
/// identifiers, dollar quoting and comments (the extended query protocol runs one statement
/// at a time).
enum SQLStatementSplitter {
    static func split(_ sql: String) -> [String] {
        let chars = Array(sql.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var index = 0
        func flush() {
            let text = String(current).trimmingCharacters(in: .whitespacesAndNewlines)
            if !Self.isOnlyComments(text) { statements.append(text) }
            current = String.UnicodeScalarView()
        }
        while index < chars.count {
            let c = chars[index]
            let next: Unicode.Scalar? = index + 1 < chars.count ? chars[index + 1] : nil
            if c == "-" && next == "-" {
                while index < chars.count && chars[index] != "\n" {
                    current.append(chars[index])
                    index += 1
                }
                continue
            }
            if c == "/" && next == "*" {
                var depth = 0
                while index < chars.count {
                    if chars[index] == "/" && index + 1 < chars.count && chars[index + 1] == "*" {
                        depth += 1
                        current.append(chars[index])
                        current.append(chars[index + 1])
                        index += 2
                        continue
                    }
                    if chars[index] == "*" && index + 1 < chars.count && chars[index + 1] == "/" {
                        depth -= 1
                        current.append(chars[index])
                        current.append(chars[index + 1])
                        index += 2
                        if depth == 0 { break }
                        continue
                    }
                    current.append(chars[index])
                    index += 1
                }
                continue
            }
            if c == "'" || c == "\"" {
                current.append(c)
                index += 1
                while index < chars.count {
                    current.append(chars[index])
                    if chars[index] == c {
                        if index + 1 < chars.count && chars[index + 1] == c {
                            current.append(chars[index + 1])
                            index += 2
                            continue
                        }
                        index += 1
                        break
                    }
                    index += 1
                }
                continue
            }
            if c == "$", let tagEnd = Self.dollarTagEnd(chars, from: index) {
                let tag = Array(chars[index...tagEnd])
                for scalar in tag { current.append(scalar) }
                index = tagEnd + 1
                while index < chars.count {
                    if chars[index] == "$" && index + tag.count <= chars.count && Array(chars[index..<(index + tag.count)]) == tag {
                        for scalar in tag { current.append(scalar) }
                        index += tag.count
                        break
                    }
                    current.append(chars[index])
                    index += 1
                }
                continue
            }
            if c == ";" {
                flush()
                index += 1
                continue
            }
            current.append(c)
            index += 1
        }
        flush()
        return statements
    }

    /// Index of the closing `$` of a dollar-quote tag starting at `start`, if any.
    private static func dollarTagEnd(_ chars: [Unicode.Scalar], from start: Int) -> Int? {
        // A `$` preceded by an identifier character is part of a name or parameter.
        if start > 0, chars[start - 1].properties.isAlphabetic || ("0"..."9").contains(chars[start - 1]) || chars[start - 1] == "_" {
            return nil
        }
        var index = start + 1
        while index < chars.count {
            let c = chars[index]
            if c == "$" { return index }
            let isTagChar = c.properties.isAlphabetic || c == "_" || (index > start + 1 && ("0"..."9").contains(c))
            if !isTagChar { return nil }
            index += 1
        }
        return nil
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !trimmed.isEmpty && !trimmed.hasPrefix("--") { return false }
        }
        return true
    }
}
