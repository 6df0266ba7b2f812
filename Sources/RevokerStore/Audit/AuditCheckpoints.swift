import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Writes the signed checkpoints of the audit trail (migrations 0006, 0013): each covers the rows
/// of every transaction that ended since the previous one, lists those still open, and moves the
/// heads of the chains it covers to their last covered row (migration 0007).
public struct AuditCheckpoints: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// One transaction-level advisory lock: one writer at a time across the fleet.
    static let lockKey: Int64 = 0x7265_766f_6b65_7201

    /// Takes a checkpoint over the rows of transactions that ended since the last one, signs
    /// it with `signer`'s key and stores it. Returns nil when there is nothing new, or when
    /// another process is taking one right now.
    ///
    /// Throws ``RevokerStoreError/Code/historyRewritten`` when the stored checkpoints no longer
    /// extend the last one `signer` knows: it never signs over a rewritten history.
    @discardableResult
    public func take(signer: AuditSigner, logger: Logger? = nil) async throws -> AuditCheckpoint? {
        try await take(signer: signer, createdAtMicros: nil, logger: logger)
    }

    /// Takes a checkpoint dated `date` instead of the database's clock: a benchmark's history
    /// of years (migration 0017), each day's rows signed as of that day.
    @_spi(History) @discardableResult
    public func take(signer: AuditSigner, backdatedTo date: Date, logger: Logger? = nil) async throws -> AuditCheckpoint? {
        try await take(signer: signer, createdAtMicros: Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down)), logger: logger)
    }

    private func take(signer: AuditSigner, createdAtMicros: Int64?, logger: Logger?) async throws -> AuditCheckpoint? {
        let logger = logger ?? self.logger
        let checkpoint: AuditCheckpoint? = try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let locked =
                    try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.lockKey))", logger: logger)
                    .collect().first?.decode(Bool.self) ?? false
                guard locked else { return nil }
                let known = signer.lastKnown
                var stored: [AuditCheckpoint] = []
                if let known { stored = try await Self.read("WHERE seq >= \(known.seq) ORDER BY seq", on: connection, logger: logger) }
                let newest = try await Self.read("ORDER BY seq DESC LIMIT 1", on: connection, logger: logger).first
                let last = try signer.history(stored, newest: newest, known: known)
                let from = last?.txidTo ?? 0
                let horizon = try await Self.horizon(on: connection, logger: logger)
                let to = horizon.xmax
                let open = horizon.open
                // Left open by the last checkpoint and ended since: this one takes their rows.
                let late = (last?.openTxids ?? []).filter { !open.contains($0) }
                guard to > from || !late.isEmpty else { return nil }
                var tree = MerkleTree.Builder()
                let slice = try await Self.sliceRows(from: from, to: to, late: late, open: open, on: connection, logger: logger)
                for row in slice { tree.append(row.hash) }
                guard tree.count > 0 else { return nil }
                let checkpoint = try AuditCheckpoint(
                    seq: (last?.seq ?? 0) + 1,
                    createdAtMicros: createdAtMicros ?? horizon.takenAtMicros,
                    txidFrom: from,
                    txidTo: to,
                    rowCount: Int64(tree.count),
                    merkleRoot: tree.root,
                    previousHash: last?.hash ?? AuditCheckpoint.genesis,
                    openTxids: open,
                    lateTxids: late
                ).signed(with: signer.key)
                try await connection.run(
                    """
                    INSERT INTO revoker.audit_checkpoints
                        (seq, created_at, txid_from, txid_to, row_count, merkle_root, previous_hash, hash, key_id, signature,
                         open_txids, late_txids)
                    VALUES (\(checkpoint.seq), timestamptz 'epoch' + \(checkpoint.createdAtMicros) * interval '1 microsecond',
                            \(String(from))::xid8, \(String(to))::xid8, \(checkpoint.rowCount), \(Data(checkpoint.merkleRoot)),
                            \(Data(checkpoint.previousHash)), \(Data(checkpoint.hash)), \(checkpoint.keyID),
                            \(Data(checkpoint.signature)), \(open.map(String.init))::text[]::xid8[], \(late.map(String.init))::text[]::xid8[])
                    """,
                    logger: logger
                )
                try await connection.run("SELECT revoker.audit_advance_heads()", logger: logger)
                return checkpoint
            }
        }
        if let checkpoint {
            signer.remember(checkpoint)
            if let path = signer.witnessPath {
                do {
                    try AuditWitness.append(checkpoint, to: path)
                } catch {
                    logger.error(
                        "Could not write the checkpoint to the witness; it is stored and published as an event",
                        metadata: ["revoker.checkpoint": "\(checkpoint.seq)", "revoker.error": "\(error)"]
                    )
                }
            }
        }
        return checkpoint
    }

    /// Records that `signer` refused to sign, as a `checkpoint_refused` row of the `revoker`
    /// chain, which the outbox publishes to every app as `audit.checkpoint_refused`.
    public func recordRefusal(_ refusal: AuditSigner.Refusal, actor: String, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await AuditWriter.write(
                    [AuditEvent(.checkpointRefused, detail: "\(refusal.code) \(refusal.message)")],
                    actor: actor,
                    on: connection,
                    logger: logger
                )
            }
        }
    }

    /// The rows (id, hash) of a slice in id order: those of the transactions in [from, to) and
    /// of `late`, except `open`'s; only those that occurred at or after `since` when given.
    static func sliceRows(
        from: UInt64,
        to: UInt64,
        late: [UInt64],
        open: [UInt64],
        since: Date? = nil,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [(id: Int64, hash: [UInt8])] {
        let rows = try await connection.query(
            """
            SELECT id, hash FROM revoker.audit_events
            WHERE ((txid >= \(String(from))::xid8 AND txid < \(String(to))::xid8) OR txid = ANY(\(late.map(String.init))::text[]::xid8[]))
              AND txid <> ALL(\(open.map(String.init))::text[]::xid8[])
              AND (\(since)::timestamptz IS NULL OR occurred_at >= \(since)::timestamptz)
            ORDER BY id
            """,
            logger: logger
        )
        var slice: [(id: Int64, hash: [UInt8])] = []
        for try await (id, hash) in rows.decode((Int64, Data).self) { slice.append((id, Array(hash))) }
        return slice
    }

    /// A checkpoint's rows that an archive took away (migration 0022): how many, and their leaves
    /// when the checkpoint also covers rows still here (nil when all of its rows are archived).
    struct Archived {
        var rows: Int64
        var leaves: [(id: Int64, hash: [UInt8])]?

        static func encode(_ leaves: [(id: Int64, hash: [UInt8])]) -> [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(leaves.count * 40)
            for leaf in leaves {
                withUnsafeBytes(of: leaf.id.bigEndian) { bytes += $0 }
                bytes += leaf.hash
            }
            return bytes
        }

        static func decode(_ bytes: [UInt8]) -> [(id: Int64, hash: [UInt8])] {
            stride(from: 0, to: bytes.count - 39, by: 40).map { offset in
                let id = bytes[offset..<offset + 8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
                return (id, Array(bytes[offset + 8..<offset + 40]))
            }
        }
    }

    /// What archives took from the checkpoints `seqs` (all when nil), by seq.
    static func archived(_ seqs: [Int64]?, on connection: PostgresConnection, logger: Logger) async throws -> [Int64: Archived] {
        let rows = try await connection.query(
            """
            SELECT seq, archived_rows, leaves FROM revoker.audit_archived_checkpoints
            WHERE \(seqs == nil) OR seq = ANY(\(seqs ?? []))
            """,
            logger: logger
        )
        var found: [Int64: Archived] = [:]
        for try await (seq, count, leaves) in rows.decode((Int64, Int64, Data?).self) {
            found[seq] = Archived(rows: count, leaves: leaves.map { Archived.decode(Array($0)) })
        }
        return found
    }

    /// The last archived row (seq, hash) of each chain of `chains` that an archive took.
    static func archivedHeads(
        _ chains: [String],
        client: PostgresClient,
        logger: Logger
    ) async throws
        -> [String: (seq: Int64, hash: [UInt8])]
    {
        guard !chains.isEmpty else { return [:] }
        var heads: [String: (seq: Int64, hash: [UInt8])] = [:]
        let rows = try await client.query(
            """
            SELECT chain_key, archived_seq, archived_hash FROM revoker.audit_chains
            WHERE chain_key = ANY(\(chains)) AND archived_seq IS NOT NULL
            """,
            logger: logger
        )
        for try await (chain, seq, hash) in rows.decode((String, Int64, Data).self) { heads[chain] = (seq, Array(hash)) }
        return heads
    }

    /// Every row of a checkpoint (id, hash) in id order: those here, and those an archive took
    /// with their leaves kept here. Nil when all of its rows are archived.
    static func allSliceRows(
        _ checkpoint: AuditCheckpoint,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws
        -> [(id: Int64, hash: [UInt8])]?
    {
        let here = try await sliceRows(
            from: checkpoint.txidFrom,
            to: checkpoint.txidTo,
            late: checkpoint.lateTxids,
            open: checkpoint.openTxids,
            on: connection,
            logger: logger
        )
        guard let archived = try await archived([checkpoint.seq], on: connection, logger: logger)[checkpoint.seq] else { return here }
        guard let leaves = archived.leaves else { return nil }
        return (here + leaves).sorted { $0.id < $1.id }
    }

    /// Where a checkpoint taken now would end: the snapshot's xmax, the transactions below it
    /// still running that may write here (ascending), and the time.
    static func horizon(on connection: PostgresConnection, logger: Logger) async throws -> (xmax: UInt64, open: [UInt64], takenAtMicros: Int64) {
        // A transaction running in another database cannot write here, so it is not listed
        // open; one whose database is unknown counts as ours.
        let row = try await connection.query(
            """
            WITH snapshot AS (SELECT pg_current_snapshot() AS s, clock_timestamp() AS taken_at),
            elsewhere AS (
                SELECT backend_xid FROM pg_stat_activity
                WHERE backend_xid IS NOT NULL AND datname IS NOT NULL AND datname <> current_database()
            )
            SELECT pg_snapshot_xmax(s)::text,
                   coalesce((SELECT array_agg(x::text) FROM pg_snapshot_xip(s) AS x
                             WHERE xid(x) NOT IN (SELECT backend_xid FROM elsewhere)), '{}'),
                   \(unescaped: SQLTime.micros("taken_at"))
            FROM snapshot
            """,
            logger: logger
        ).collect().first?.decode((String, [String], Int64).self)
        guard let row else { throw RevokerStoreError(.unexpectedData, "the database returned no snapshot") }
        return (try txid(row.0), try row.1.map(txid).sorted(), row.2)
    }

    /// The transactions that a checkpoint taken now would leave open, oldest first, with who
    /// holds them as far as this role may see (`pg_read_all_stats` shows every role's).
    public func openTransactions(logger: Logger? = nil) async throws -> [OpenTransaction] {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                let open = try await Self.horizon(on: connection, logger: logger).open
                guard !open.isEmpty else { return [] }
                let rows = try await connection.query(
                    """
                    SELECT t.txid, a.pid, a.usename::text, a.application_name, a.client_addr::text, a.state,
                           extract(epoch FROM clock_timestamp() - a.xact_start)::float8
                    FROM unnest(\(open.map(String.init))::text[]) AS t(txid)
                    LEFT JOIN pg_stat_activity a ON a.backend_xid::text = t.txid
                    ORDER BY a.xact_start NULLS LAST, t.txid::xid8
                    """,
                    logger: logger
                ).collect()
                return try rows.map { row in
                    let cells = try row.decode((String, Int32?, String?, String?, String?, String?, Double?).self)
                    return OpenTransaction(
                        txid: try Self.txid(cells.0),
                        pid: cells.1.map(Int.init),
                        role: cells.2,
                        application: cells.3.flatMap { $0.isEmpty ? nil : $0 },
                        clientAddress: cells.4,
                        state: cells.5,
                        ageSeconds: cells.6
                    )
                }
            }
        }
    }

    /// The checkpoints from the last one starting at or before the lowest of `txids` on, as far
    /// as covering every one of them takes (or to the newest): what a receipt needs, rather than
    /// every checkpoint of years.
    public func covering(_ txids: [UInt64], logger: Logger? = nil) async throws -> [AuditCheckpoint] {
        let logger = logger ?? self.logger
        guard let lowest = txids.min() else { return [] }
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                let first = try await Self.read(
                    "WHERE txid_from <= '\(lowest)'::xid8 ORDER BY txid_from DESC LIMIT 1",
                    on: connection,
                    logger: logger
                ).first
                let page = 64
                var found: [AuditCheckpoint] = []
                var next = first?.seq ?? 1
                while true {
                    let more = try await Self.read("WHERE seq >= \(next) ORDER BY seq LIMIT \(page)", on: connection, logger: logger)
                    found += more
                    guard more.count == page, let last = more.last,
                        txids.contains(where: { [index = AuditCheckpointSlices(found)] in index.slice(of: $0) == nil })
                    else { return found }
                    next = last.seq + 1
                }
            }
        }
    }

    /// Adds the trail's partitions for this month through three ahead where missing (migration
    /// 0020); returns how many it added. It gives up after a second of waiting for writers.
    @discardableResult
    public func ensurePartitions(logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.query("SELECT revoker.audit_ensure_partitions()", logger: logger).collect().first?.decode(Int.self) ?? 0
        }
    }

    /// Every stored checkpoint, in order.
    public func all(logger: Logger? = nil) async throws -> [AuditCheckpoint] {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await Self.read("ORDER BY seq", on: connection, logger: logger)
            }
        }
    }

    /// The newest stored checkpoint.
    public func newest(logger: Logger? = nil) async throws -> AuditCheckpoint? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await Self.read("ORDER BY seq DESC LIMIT 1", on: connection, logger: logger).first
            }
        }
    }

    /// How long the trail has gone unsigned: the newest checkpoint's age, and the age of the
    /// oldest row that no checkpoint covers yet (the first row of the oldest transaction that
    /// ended since, or of one the newest checkpoint left open; 0 when every row is covered).
    /// The second is what matters: a quiet trail signs nothing and is not late. Index reads
    /// only (`audit_events (txid, id)`), so it is cheap enough for every scrape.
    public func signingLag(logger: Logger? = nil) async throws -> AuditSigningLag {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                let newest = try await connection.query(
                    """
                    SELECT txid_to::text, open_txids::text[], extract(epoch FROM now() - created_at)::float8
                    FROM revoker.audit_checkpoints ORDER BY seq DESC LIMIT 1
                    """,
                    logger: logger
                ).collect().first?.decode((String, [String], Double).self)
                let unsigned: Double?
                if let newest {
                    let (txidTo, open) = (newest.0, newest.1)
                    // The first row of the oldest transaction past the newest checkpoint, by the
                    // (txid, id) index; and the rows of those it left open that have ended since.
                    unsigned = try await connection.query(
                        """
                        SELECT extract(epoch FROM now() - least(
                            (SELECT e.occurred_at FROM revoker.audit_events e WHERE e.txid >= \(txidTo)::xid8 ORDER BY e.txid, e.id LIMIT 1),
                            (SELECT min(e.occurred_at) FROM revoker.audit_events e WHERE e.txid = ANY(\(open)::text[]::xid8[]))
                        ))::float8
                        """,
                        logger: logger
                    ).collect().first?.decode(Double?.self)
                } else {
                    // Nothing signed yet: every row of the chains waits.
                    unsigned = try await connection.query(
                        """
                        SELECT extract(epoch FROM now() - (
                            SELECT e.occurred_at FROM revoker.audit_events e WHERE e.txid IS NOT NULL ORDER BY e.txid, e.id LIMIT 1
                        ))::float8
                        """,
                        logger: logger
                    ).collect().first?.decode(Double?.self)
                }
                return AuditSigningLag(lastCheckpointAge: newest?.2, oldestUnsignedAge: max(0, unsigned ?? 0))
            }
        }
    }

    /// Stored checkpoints; `tail` orders and limits them (SQL with no values).
    static func read(_ tail: String, on connection: PostgresConnection, logger: Logger) async throws -> [AuditCheckpoint] {
        var checkpoints: [AuditCheckpoint] = []
        let rows = try await connection.query(
            """
            SELECT seq, \(unescaped: SQLTime.micros("created_at")), txid_from::text, txid_to::text, row_count, merkle_root,
                   previous_hash, open_txids::text[], late_txids::text[], key_id, signature
            FROM revoker.audit_checkpoints \(unescaped: tail)
            """,
            logger: logger
        )
        for try await row in rows.decode((Int64, Int64, String, String, Int64, Data, Data, [String], [String], String, Data).self) {
            checkpoints.append(
                AuditCheckpoint(
                    seq: row.0,
                    createdAtMicros: row.1,
                    txidFrom: try txid(row.2),
                    txidTo: try txid(row.3),
                    rowCount: row.4,
                    merkleRoot: Array(row.5),
                    previousHash: Array(row.6),
                    openTxids: try row.7.map(txid).sorted(),
                    lateTxids: try row.8.map(txid).sorted(),
                    keyID: row.9,
                    signature: Array(row.10)
                )
            )
        }
        return checkpoints
    }

    static func txid(_ text: String) throws -> UInt64 {
        guard let value = UInt64(text) else {
            throw RevokerStoreError(.unexpectedData, "the database returned a transaction id that is not a number")
        }
        return value
    }
}

/// A transaction that keeps its audit rows, if it writes any, out of checkpoints until it ends.
public struct OpenTransaction: Sendable, Hashable, Encodable {
    public var txid: UInt64
    /// The backend holding it, its role, application and address: nil where this role may not see them.
    public var pid: Int?
    public var role: String?
    public var application: String?
    public var clientAddress: String?
    /// `idle in transaction` is the usual culprit.
    public var state: String?
    /// How long it has been open.
    public var ageSeconds: Double?

    enum CodingKeys: String, CodingKey {
        case txid, pid, role, application
        case clientAddress = "client_address"
        case state
        case ageSeconds = "age_seconds"
    }

    /// One line for people.
    public var summary: String {
        let age = ageSeconds.map { "open \(Int($0)) s" } ?? "open for an unknown time"
        let who = [role.map { "role \($0)" }, application.map { "application \($0)" }, clientAddress.map { "from \($0)" }, pid.map { "pid \($0)" }]
            .compactMap { $0 }
        let holder = who.isEmpty ? "held by a session this role cannot see (grant pg_read_all_stats)" : who.joined(separator: ", ")
        return "transaction \(txid): \(age), \(state ?? "state unknown"), \(holder)"
    }
}

/// How long the audit trail has gone unsigned (``AuditCheckpoints/signingLag(logger:)``).
public struct AuditSigningLag: Sendable, Hashable {
    /// Seconds since the newest checkpoint was taken; nil when none was.
    public var lastCheckpointAge: Double?
    /// Seconds the oldest row no checkpoint covers has waited; 0 when every row is covered.
    public var oldestUnsignedAge: Double

    public init(lastCheckpointAge: Double?, oldestUnsignedAge: Double) {
        self.lastCheckpointAge = lastCheckpointAge
        self.oldestUnsignedAge = oldestUnsignedAge
    }
}
