import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Takes whole months of the trail out of the database (migrations 0020, 0022): writes them to
/// an ``AuditArchive`` file, checks the file, and only then records what left and drops the
/// months' partitions, in one transaction. Needs the schema owner's connection (only the owner
/// may drop a partition), and the audit signing key: the file's extent is signed with it.
public struct AuditArchiver: Sendable {
    let client: PostgresClient
    let key: AuditSigningKey
    let logger: Logger

    public init(client: PostgresClient, key: AuditSigningKey, logger: Logger) {
        self.client = client
        self.key = key
        self.logger = logger
    }

    public struct Result: Sendable {
        public var months: [String]
        public var rows: Int
        public var chains: Int
        public var checkpoints: Int
        public var sha256: [UInt8]
    }

    /// Archives every month before `before` (the first day of a month, UTC) to a new file at
    /// `path`. Refuses the current month, and rows no checkpoint covers yet.
    public func archive(before: Date, to path: String, progress: @Sendable (String) -> Void = { _ in }) async throws -> Result {
        let logger = self.logger
        guard !FileManager.default.fileExists(atPath: path) else {
            throw RevokerStoreError(.conflict, "\(path) exists: an archive is never written over")
        }
        let months = try await self.months(before: before)
        let checkpoints = try await AuditCheckpoints(client: client, logger: logger).all()
        let slices = AuditCheckpointSlices(checkpoints)

        // Which checkpoints the months' rows are under, and how many of each.
        var counts: [Int: Int64] = [:]
        var rows = 0
        try await StoreDatabase.run(logger) {
            let found = try await self.client.query(
                "SELECT id, txid::text FROM revoker.audit_events WHERE occurred_at < \(before) ORDER BY id",
                logger: logger
            )
            for try await (id, txid) in found.decode((Int64, String).self) {
                guard let index = slices.slice(of: try AuditCheckpoints.txid(txid)) else {
                    throw RevokerStoreError(
                        .conflict,
                        "audit row \(id) is not under a checkpoint yet (its transaction is still open, or no checkpoint was taken since): "
                            + "archive after the next checkpoint"
                    )
                }
                counts[index, default: 0] += 1
                rows += 1
            }
        }
        progress("\(rows) audit rows in \(months.joined(separator: ", ")) under \(counts.count) checkpoints")
        let range = counts.keys.min().flatMap { first in counts.keys.max().map { Array(first...$0) } } ?? []
        let (archived, outside) = try await self.outside(range.map { checkpoints[$0] }, counts: range.map { counts[$0] ?? 0 }, before: before)

        // The file, written beside its name and moved there once it checks.
        let partial = path + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        let writer = try GzipLineWriter(path: partial)
        // What is written is counted, for the extent signed on the end line.
        var tally = AuditArchive.Tally()
        func put(_ line: AuditArchive.Line) throws {
            tally.count(line)
            try writer.write(try line.json())
        }
        let now = Date()
        try put(AuditArchive.Line.header(before: Self.format(before), months: months, createdAt: now.formatted(.iso8601)))
        for index in range { try put(AuditArchive.Line.checkpoint(checkpoints[index])) }
        for (index, leaves) in zip(range, outside) {
            for leaf in leaves {
                try put(AuditArchive.Line.leaf(checkpoint: checkpoints[index].seq, id: leaf.id, hash: leaf.hash))
            }
        }
        // Checkpoints that still cover rows here after this archive keep the archived leaves.
        let split = Set(range.filter { (archived[checkpoints[$0].seq]?.rows ?? 0) + (counts[$0] ?? 0) < checkpoints[$0].rowCount })
        var keptLeaves: [Int: [(id: Int64, hash: [UInt8])]] = [:]
        var heads: [String: (seq: Int64, hash: [UInt8])] = [:]
        var continuing: [String] = []
        var (firstID, lastID): (Int64?, Int64?) = (nil, nil)
        var written = 0
        var requests: [UUID: ArchivedRequest] = [:]
        try await StoreDatabase.run(logger) {
            let found = try await self.client.query(
                "SELECT \(unescaped: AuditVerifier.rowColumns) FROM revoker.audit_events WHERE occurred_at < \(before) ORDER BY id",
                logger: logger
            )
            for try await cells in found {
                let (row, previous, hash) = try AuditVerifier.decodeRow(cells)
                try put(AuditArchive.Line.row(row, previous: previous, hash: hash))
                if heads[row.chainKey] == nil, row.chainSeq > 1 { continuing.append(row.chainKey) }
                heads[row.chainKey] = (row.chainSeq, hash)
                if let index = slices.slice(of: row.txid), split.contains(index) { keptLeaves[index, default: []].append((row.id, hash)) }
                if let request = row.requestID, row.chainKey == request.uuidString.lowercased() {
                    if row.event == "enqueued" {
                        requests[request] = ArchivedRequest(enqueued: row, requestID: request)
                    } else {
                        requests[request]?.take(row)
                    }
                }
                firstID = firstID ?? row.id
                lastID = row.id
                written += 1
            }
        }
        guard written == rows else {
            throw RevokerStoreError(.conflict, "rows of the archived months changed while they were read: nothing was dropped")
        }
        let starts = try await StoreDatabase.run(logger) { try await AuditCheckpoints.archivedHeads(continuing, client: self.client, logger: logger) }
        for chain in continuing {
            guard let start = starts[chain] else { continue }
            try put(AuditArchive.Line.start(chain: chain, seq: start.seq, hash: start.hash))
        }
        let extent = try tally.extent(chains: heads.count).signed(with: key)
        try writer.write(try AuditArchive.Line.end(rows: rows, chains: heads.count, extent: extent).json())
        let sha256 = try writer.finish()
        // Checkpoints' signatures were checked when they were taken; here, that the file holds
        // every row, chained and under its checkpoint's root, as its signed extent says.
        let check = try AuditArchive.verify(path: partial, keys: [key.publicKey])
        guard check.valid, check.rows == rows else {
            throw RevokerStoreError(
                .unexpectedData,
                "the archive written does not verify (\(check.problems.first ?? "row count differs")): nothing was dropped; run `revoker audit verify`",
                detail: check.problems.prefix(5).joined(separator: "; ")
            )
        }
        try FileManager.default.moveItem(atPath: partial, toPath: path)
        progress("wrote \(path) (\(rows) rows, sha256 \(sha256.hex)); dropping \(months.count) months")

        do {
            try await self.record(
                before: before,
                months: months,
                file: URL(fileURLWithPath: path).lastPathComponent,
                sha256: sha256,
                rows: rows,
                ids: (firstID, lastID),
                extent: (extent.firstCheckpoint, extent.lastCheckpoint),
                heads: heads,
                requests: Array(requests.values),
                checkpoints: range.map { index in
                    let seq = checkpoints[index].seq
                    let total = (archived[seq]?.rows ?? 0) + (counts[index] ?? 0)
                    let leaves = split.contains(index) ? ((archived[seq]?.leaves ?? []) + (keptLeaves[index] ?? [])).sorted { $0.id < $1.id } : nil
                    return (seq, total, leaves)
                }.filter { $0.1 > 0 }
            )
        } catch let error as RevokerStoreError where error.code == .conflict {
            // Recorded nowhere and short of rows: not an archive of these months.
            try? FileManager.default.removeItem(atPath: path)
            throw error
        }
        return Result(months: months, rows: rows, chains: heads.count, checkpoints: range.count, sha256: sha256)
    }

    /// The partitions' months before `before`, oldest first; refuses this month and later.
    private func months(before: Date) async throws -> [String] {
        let logger = self.logger
        let (names, current) = try await StoreDatabase.run(logger) {
            let names = try await self.client.query(
                """
                SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'revoker.audit_events'::regclass ORDER BY c.relname
                """,
                logger: logger
            ).collect().map { try $0.decode(String.self) }
            let current = try await self.client.query("SELECT date_trunc('month', now(), 'UTC')", logger: logger).collect().first?.decode(Date.self)
            return (names, current ?? Date())
        }
        guard before <= current else {
            throw RevokerStoreError(
                .invalidArgument,
                "the current month (\(Self.format(current))) and later cannot be archived: rows are still written to it"
            )
        }
        let limit = "audit_events_" + Self.format(before).replacingOccurrences(of: "-", with: "_")
        let months = names.filter { $0 < limit }.map { String($0.dropFirst("audit_events_".count)).replacingOccurrences(of: "_", with: "-") }
        guard !months.isEmpty else { throw RevokerStoreError(.notFound, "the trail holds no month before \(Self.format(before)) to archive") }
        return months
    }

    /// For each checkpoint of `checkpoints` (with `counts` of its rows in this archive): what
    /// earlier archives took, and the leaves of its rows not in this archive (still here, or in
    /// an earlier archive), checked to be exactly the rest of its rows.
    private func outside(
        _ checkpoints: [AuditCheckpoint],
        counts: [Int64],
        before: Date
    ) async throws
        -> ([Int64: AuditCheckpoints.Archived], [[(id: Int64, hash: [UInt8])]])
    {
        let logger = self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                let archived = try await AuditCheckpoints.archived(checkpoints.map(\.seq), on: connection, logger: logger)
                var outside: [[(id: Int64, hash: [UInt8])]] = []
                for (checkpoint, count) in zip(checkpoints, counts) {
                    var leaves = archived[checkpoint.seq]?.leaves ?? []
                    let earlier = archived[checkpoint.seq]?.rows ?? 0
                    if earlier + count < checkpoint.rowCount {
                        leaves += try await AuditCheckpoints.sliceRows(
                            from: checkpoint.txidFrom,
                            to: checkpoint.txidTo,
                            late: checkpoint.lateTxids,
                            open: checkpoint.openTxids,
                            since: before,
                            on: connection,
                            logger: logger
                        )
                    }
                    guard Int64(leaves.count) + count == checkpoint.rowCount else {
                        throw RevokerStoreError(
                            .unexpectedData,
                            "checkpoint \(checkpoint.seq) signed \(checkpoint.rowCount) rows, the trail and earlier archives hold "
                                + "\(Int64(leaves.count) + count): run `revoker audit verify`; nothing was archived"
                        )
                    }
                    outside.append(leaves.sorted { $0.id < $1.id })
                }
                return (archived, outside)
            }
        }
    }

    /// What left, and the months dropped, in one transaction.
    private func record(
        before: Date,
        months: [String],
        file: String,
        sha256: [UInt8],
        rows: Int,
        ids: (Int64?, Int64?),
        extent: (first: Int64?, last: Int64?),
        heads: [String: (seq: Int64, hash: [UInt8])],
        requests: [ArchivedRequest],
        checkpoints: [(seq: Int64, rows: Int64, leaves: [(id: Int64, hash: [UInt8])]?)]
    ) async throws {
        let logger = self.logger
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                // Dropping a month waits for the trail's writers; a minute is more than any of them takes.
                try await connection.query("SET LOCAL lock_timeout = '60s'", logger: logger)
                // A transaction begun before the reads (last month, or routed there in a month's first
                // minute) can still commit rows into these months. Locked as the DETACH would lock it,
                // the trail takes no more, so the rows counted now are the rows dropped.
                try await connection.query("LOCK TABLE revoker.audit_events IN ACCESS EXCLUSIVE MODE", logger: logger)
                let now = try await connection.query(
                    "SELECT count(*), min(id), max(id) FROM revoker.audit_events WHERE occurred_at < \(before)",
                    logger: logger
                ).collect().first?.decode((Int64, Int64?, Int64?).self)
                guard let now, now.0 == Int64(rows), now.1 == ids.0, now.2 == ids.1 else {
                    throw RevokerStoreError(
                        .conflict,
                        "\((now?.0 ?? 0) - Int64(rows)) audit rows were committed into \(months.joined(separator: ", ")) after they were read "
                            + "(a transaction begun before the month ended): nothing was dropped; archive again"
                    )
                }
                let id = try await connection.query(
                    """
                    INSERT INTO revoker.audit_archives
                        (before, months, file_name, file_sha256, row_count, first_id, last_id, first_checkpoint, last_checkpoint)
                    VALUES (\(before), \(months), \(file), \(Data(sha256)), \(Int64(rows)), \(ids.0), \(ids.1), \(extent.first), \(extent.last))
                    RETURNING id
                    """,
                    logger: logger
                ).collect().first?.decode(Int64.self)
                let entries = Array(heads)
                for start in stride(from: 0, to: entries.count, by: 5_000) {
                    let batch = entries[start..<min(start + 5_000, entries.count)]
                    try await connection.query(
                        """
                        INSERT INTO revoker.audit_chains AS c (chain_key, last_seq, last_hash, archived_seq, archived_hash)
                        SELECT k, s, decode(h, 'hex'), s, decode(h, 'hex')
                        FROM unnest(\(batch.map(\.key))::text[], \(batch.map(\.value.seq))::int8[], \(batch.map(\.value.hash.hex))::text[]) AS t(k, s, h)
                        ON CONFLICT (chain_key) DO UPDATE SET archived_seq = excluded.archived_seq, archived_hash = excluded.archived_hash
                        """,
                        logger: logger
                    )
                }
                for start in stride(from: 0, to: requests.count, by: 5_000) {
                    let batch = requests[start..<min(start + 5_000, requests.count)]
                    let rows = String(decoding: try JSONEncoder().encode(Array(batch)), as: UTF8.self)
                    try await connection.query(
                        """
                        INSERT INTO revoker.audit_archived_requests
                            (request_id, archive_id, enqueued_id, requested_at, requested_by, client_id, external_reference, user_id,
                             user_ids, outcome, finished_at)
                        SELECT request_id, \(id), enqueued_id, timestamptz 'epoch' + requested_at_us * interval '1 microsecond',
                               requested_by, client_id, external_reference, user_id, user_ids, outcome,
                               timestamptz 'epoch' + finished_at_us * interval '1 microsecond'
                        FROM jsonb_to_recordset(\(rows)::jsonb) AS t(
                            request_id uuid, enqueued_id int8, requested_at_us int8, requested_by text, client_id text,
                            external_reference text, user_id text, user_ids text[], outcome text, finished_at_us int8)
                        ON CONFLICT (request_id) DO NOTHING
                        """,
                        logger: logger
                    )
                }
                for checkpoint in checkpoints {
                    let leaves = checkpoint.leaves.map { Data(AuditCheckpoints.Archived.encode($0)) }
                    try await connection.query(
                        """
                        INSERT INTO revoker.audit_archived_checkpoints (seq, archive_id, archived_rows, leaves)
                        VALUES (\(checkpoint.seq), \(id), \(checkpoint.rows), \(leaves))
                        ON CONFLICT (seq) DO UPDATE SET archive_id = excluded.archive_id, archived_rows = excluded.archived_rows,
                            leaves = excluded.leaves
                        """,
                        logger: logger
                    )
                }
                for month in months {
                    let name = "revoker.audit_events_" + month.replacingOccurrences(of: "-", with: "_")
                    try await connection.query(PostgresQuery(unsafeSQL: "ALTER TABLE revoker.audit_events DETACH PARTITION \(name)"), logger: logger)
                    try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(name)"), logger: logger)
                }
                let note = "archived \(rows) rows of \(months.joined(separator: ", ")) to \(file) (sha256 \(sha256.hex))"
                try await connection.query(
                    "INSERT INTO revoker.audit_events (event, actor, detail) VALUES ('note', 'revoker', \(String(note.prefix(500))))",
                    logger: logger
                )
            }
        }
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        return calendar
    }()

    /// `YYYY-MM` of a month's first day (UTC).
    static func format(_ month: Date) -> String {
        let parts = utc.dateComponents([.year, .month], from: month)
        return String(format: "%04d-%02d", parts.year ?? 0, parts.month ?? 0)
    }

    /// The first day (UTC) of month `text` (`YYYY-MM`), or nil.
    public static func month(_ text: String) -> Date? {
        let parts = text.split(separator: "-")
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2, let year = Int(parts[0]), let month = Int(parts[1]),
            (1...12).contains(month)
        else { return nil }
        return utc.date(from: DateComponents(year: year, month: month, day: 1))
    }

    /// A request as the compliance search shows it, from its archived rows.
    struct ArchivedRequest: Encodable {
        var requestID: UUID
        var enqueuedID: Int64
        var requestedAtMicros: Int64
        var requestedBy: String
        var clientID: String?
        var reference: String?
        var userID: String?
        /// Every user id its rows name, in the order they first did (the search finds it by any).
        var userIDs: [String] = []
        var outcome: String?
        var finishedAtMicros: Int64?

        init(enqueued row: AuditChainRow, requestID: UUID) {
            self.requestID = requestID
            enqueuedID = row.id
            requestedAtMicros = row.occurredAtMicros
            requestedBy = row.actor
            clientID = row.clientID
            reference = row.externalReference
            userID = row.userID
            userIDs = row.userID.map { [$0] } ?? []
        }

        enum CodingKeys: String, CodingKey {
            case requestID = "request_id"
            case enqueuedID = "enqueued_id"
            case requestedAtMicros = "requested_at_us"
            case requestedBy = "requested_by"
            case clientID = "client_id"
            case reference = "external_reference"
            case userID = "user_id"
            case userIDs = "user_ids"
            case outcome
            case finishedAtMicros = "finished_at_us"
        }

        mutating func take(_ row: AuditChainRow) {
            if let user = row.userID {
                userID = user
                if !userIDs.contains(user) { userIDs.append(user) }
            }
            if AuditReceipt.finalEvents.contains(row.event) {
                outcome = AuditReceipt.outcome(event: row.event, detail: row.detail) ?? row.event
                finishedAtMicros = row.occurredAtMicros
            }
        }
    }
}
