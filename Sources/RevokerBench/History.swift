import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerLocalStack
@_spi(History) import RevokerStore

/// What a history of years holds, and where it is kept.
public struct HistoryOptions: Sendable {
    /// Audit rows to reach (the reference point is ten million).
    public var auditRows = 10_000_000
    /// Grants held at the end (the reference point is a million).
    public var grants = 1_000_000
    /// Days of history, ending yesterday.
    public var days = 730
    /// Checkpoints signed a day, each over its part of the day (the service signs one a minute
    /// while rows come; a day's slice of ten million rows would make receipts read 14,000 rows).
    public var checkpointsPerDay = 24
    /// The database the history is kept in, on the server; made when missing, never dropped.
    public var database = "revoker_history"
    /// Where the history's sealing key and audit signing key are kept between runs.
    public var keysDirectory: String
    /// The PostgreSQL server (`postgres://…`).
    public var serverURL: String
    /// Stop after writing this many days (the next run resumes); nil writes them all.
    public var stopAfterDays: Int?

    public init(serverURL: String, keysDirectory: String) {
        self.serverURL = serverURL
        self.keysDirectory = keysDirectory
    }
}

/// Fills a database with years of Revoker's history through the real schema: requests finished
/// as a deployment's mix of outcomes, grants held with their tokens sealed by the history's key,
/// notifications, outbox events, and every audit row stamped and chained by the real trigger
/// (migration 0017 lets it keep each row's own time), a signed checkpoint after each day.
///
/// A day is one transaction: a run stopped at any point resumes from the day after the last
/// one written, with the plan it started with.
public struct HistoryGenerator: Sendable {
    public let options: HistoryOptions
    let logger: Logger
    let progress: @Sendable (String) -> Void

    public init(
        options: HistoryOptions,
        logger: Logger = Logger(label: "revoker.history", factory: { _ in SwiftLogNoOpLogHandler() }),
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.options = options
        self.logger = logger
        self.progress = progress
    }

    /// The history's keys: made on the first run, read on the next.
    public struct Keys: Sendable {
        public let sealingKeysFile: String
        public let auditSigningKeyFile: String
        public let keyring: CredentialKeyring
        public let auditKey: AuditSigningKey

        static func open(in directory: String) throws -> Keys {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let sealing = (directory as NSString).appendingPathComponent("sealing-keys")
            let audit = (directory as NSString).appendingPathComponent("audit-signing-key.pem")
            if !FileManager.default.fileExists(atPath: sealing) {
                try writeSecret(try CredentialKeyring.generateEntry(keyID: "history1") + "\n", to: sealing)
            }
            if !FileManager.default.fileExists(atPath: audit) {
                try writeSecret(AuditSigningKey().pemRepresentation + "\n", to: audit)
            }
            return Keys(
                sealingKeysFile: sealing,
                auditSigningKeyFile: audit,
                keyring: try CredentialKeyring(parsing: try String(contentsOfFile: sealing, encoding: .utf8)),
                auditKey: try AuditSigningKey(pemRepresentation: try String(contentsOfFile: audit, encoding: .utf8))
            )
        }
    }

    /// What the history holds once written.
    public struct Summary: Sendable {
        public var days: Int
        public var daysWrittenNow: Int
        public var auditRows: Int64
        public var grants: Int64
        public var revocations: Int64
        public var checkpoints: Int64
        public var seconds: Double
    }

    /// The database's URL.
    public var databaseURL: String {
        get throws {
            guard var components = URLComponents(string: options.serverURL) else {
                throw BenchmarkFailure("invalid server URL")
            }
            components.path = "/" + options.database
            return components.string ?? options.serverURL
        }
    }

    /// Writes the days not written yet and returns what the history holds.
    public func run() async throws -> Summary {
        let keys = try Keys.open(in: options.keysDirectory)
        try await createDatabaseIfMissing()
        var configuration = try PostgresClient.Configuration(url: try databaseURL)
        configuration.options.maximumConnections = 4
        let client = PostgresClient(configuration: configuration)
        let running = Task { await client.run() }
        defer { running.cancel() }
        _ = try await Migrator(client: client, logger: logger).migrate()
        for statement in Self.schema {
            _ = try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
        }
        return try await write(client: client, keys: keys)
    }

    private func createDatabaseIfMissing() async throws {
        var configuration = try PostgresClient.Configuration(url: options.serverURL)
        configuration.options.maximumConnections = 1
        let admin = PostgresClient(configuration: configuration)
        let running = Task { await admin.run() }
        defer { running.cancel() }
        let exists =
            try await admin.query("SELECT count(*) FROM pg_database WHERE datname = \(options.database)", logger: logger)
            .collect().first?.decode(Int.self) ?? 0
        if exists == 0 {
            guard options.database.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw BenchmarkFailure("--history-database takes letters, digits and underscores")
            }
            _ = try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \"\(options.database)\""), logger: logger).collect()
        }
    }

    private func write(client: PostgresClient, keys: Keys) async throws -> Summary {
        let started = Date()
        let plan = try await self.plan(client)
        let sealer = CredentialSealer(keyring: keys.keyring)
        let signer = try AuditSigner(key: keys.auditKey, trustedKeys: [keys.auditKey.publicKey])
        let checkpoints = AuditCheckpoints(client: client, logger: logger)
        let perRevocation =
            try await client.query("SELECT revoker_history.rows_per_revocation()", logger: logger).collect().first?.decode(Double.self) ?? 7
        let done = try await client.query(
            "SELECT count(*)::int, coalesce(sum(audit_rows), 0)::int8, coalesce(max(next_index), 1)::int8 FROM revoker_history.parts",
            logger: logger
        ).collect()
        guard let done = try done.first?.decode((Int, Int64, Int64).self) else { throw BenchmarkFailure("the parts written could not be read") }
        var (written, rows, next) = done
        let rowsBefore = rows
        let perDay = plan.partsPerDay
        let parts = plan.days * perDay
        if written > 0 { progress("resuming after day \(written / perDay) of \(plan.days) (\(rows) audit rows)") }
        // The trail is partitioned by month (migration 0020): the history's months need theirs.
        let lastDay = Calendar.utc.date(byAdding: .day, value: plan.days, to: plan.firstDay)!
        _ = try await client.query("SELECT revoker.audit_add_partitions(\(plan.firstDay), \(lastDay))", logger: logger).collect()
        let notificationsPerDay = 12
        var writtenNow = 0
        var lastReport = Date()
        // A part of a day is one transaction and one checkpoint, as the service signs one every so often.
        while written < parts && writtenNow < (options.stopAfterDays ?? .max / perDay) * perDay {
            let (dayIndex, part) = written.quotientAndRemainder(dividingBy: perDay)
            let day = Calendar.utc.date(byAdding: .day, value: dayIndex, to: plan.firstDay)!
            let partEnd = day.addingTimeInterval(86_400 * Double(part + 1) / Double(perDay))
            // Each part takes its share of the grants and notifications, and revocations enough to keep to the rows' pace.
            func share(_ total: Int64, _ of: Int64, _ index: Int) -> Int { Int(total * Int64(index + 1) / of - total * Int64(index) / of) }
            let grants = share(plan.grants, Int64(parts), written)
            let notifications = share(Int64(notificationsPerDay), Int64(perDay), part)
            let rowsDue = plan.auditRows * Int64(written + 1) / Int64(parts) - rows
            let revocations = max(0, Int((Double(rowsDue) - Double(grants * 7 + notifications)) / perRevocation))
            let ids = (0..<grants).map { _ in UUID() }
            var sealed: [ByteBuffer] = []
            sealed.reserveCapacity(grants)
            for id in ids {
                let token = Credential(kind: .refreshToken, secret: "r." + Self.randomText())
                sealed.append(ByteBuffer(bytes: try sealer.seal(token, grantID: id).bytes))
            }
            let dayText = Self.dayFormat(day)
            let partRows: Int64 =
                try await client.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        """
                        SELECT revoker_history.write_part(\(dayText)::date, \(part)::int, \(perDay)::int, \(next), \(revocations)::int,
                                                          \(ids), \(sealed), \(keys.keyring.currentKeyID), \(notifications)::int,
                                                          \(Self.apps.map(\.clientID)), \(Self.apps.map(\.provider)))
                        """,
                        logger: logger
                    ).collect().first?.decode(Int64.self) ?? 0
                }
            try await checkpoints.take(signer: signer, backdatedTo: min(partEnd, Date()), logger: logger)
            rows += partRows
            next += Int64(revocations + grants)
            written += 1
            writtenNow += 1
            if Date().timeIntervalSince(lastReport) > 10 || written == parts {
                lastReport = Date()
                let seconds = Date().timeIntervalSince(started)
                let left = Double(parts - written) * seconds / Double(writtenNow)
                progress(
                    "history: day \(dayIndex + 1) of \(plan.days) (\(dayText)), \(rows) audit rows, "
                        + "\(Int(Double(rows - rowsBefore) / max(seconds, 0.001))) rows/s, about \(Int(left)) s to go"
                )
            }
        }
        // A deployment years old has had its counts folded and its tables vacuumed all along:
        // measure it so, not its first fold and vacuum.
        _ = try await client.query("SELECT revoker.compact_counts()", logger: logger).collect()
        _ = try await client.query("VACUUM (ANALYZE)", logger: logger).collect()
        let totals = try await client.query(
            """
            SELECT (SELECT count(*) FROM revoker.revocation_requests WHERE purpose = 'revoke'),
                   (SELECT count(*) FROM revoker.grants WHERE state = 'held'),
                   (SELECT count(*) FROM revoker.audit_checkpoints)
            """,
            logger: logger
        ).collect()
        guard let counts = try totals.first?.decode((Int64, Int64, Int64).self) else { throw BenchmarkFailure("the history could not be counted") }
        return Summary(
            days: plan.days,
            daysWrittenNow: writtenNow / perDay,
            auditRows: rows,
            grants: counts.1,
            revocations: counts.0,
            checkpoints: counts.2,
            seconds: Date().timeIntervalSince(started)
        )
    }

    struct Plan {
        var auditRows: Int64
        var grants: Int64
        var firstDay: Date
        var days: Int
        var partsPerDay: Int
    }

    /// The plan stored by the first run; a run asking for another is refused.
    private func plan(_ client: PostgresClient) async throws -> Plan {
        let today = Calendar.utc.startOfDay(for: Date())
        let first = Calendar.utc.date(byAdding: .day, value: -options.days, to: today)!
        _ = try await client.query(
            """
            INSERT INTO revoker_history.plan (audit_rows, grants, first_day, days, parts_per_day)
            VALUES (\(Int64(options.auditRows)), \(Int64(options.grants)), \(Self.dayFormat(first))::date, \(options.days),
                    \(options.checkpointsPerDay))
            ON CONFLICT (one) DO NOTHING
            """,
            logger: logger
        ).collect()
        let stored = try await client.query(
            "SELECT audit_rows, grants, first_day::text, days, parts_per_day FROM revoker_history.plan",
            logger: logger
        ).collect().first?.decode((Int64, Int64, String, Int, Int).self)
        guard let stored, let firstDay = Self.dayParse(stored.2) else { throw BenchmarkFailure("the history's plan could not be read") }
        guard stored.0 == Int64(options.auditRows), stored.1 == Int64(options.grants), stored.3 == options.days,
            stored.4 == options.checkpointsPerDay
        else {
            throw BenchmarkFailure(
                "database \(options.database) holds a history planned for \(stored.0) audit rows, \(stored.1) grants over \(stored.3) days, "
                    + "\(stored.4) checkpoints a day; "
                    + "ask for the same to resume it, or name another --history-database"
            )
        }
        return Plan(auditRows: stored.0, grants: stored.1, firstDay: firstDay, days: stored.3, partsPerDay: stored.4)
    }

    static func dayFormat(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day())
    }

    static func dayParse(_ text: String) -> Date? {
        try? Date(text + "T00:00:00Z", strategy: .iso8601)
    }

    static func randomText() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next() as UInt64, radix: 36) }.joined()
    }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        return calendar
    }()
}
