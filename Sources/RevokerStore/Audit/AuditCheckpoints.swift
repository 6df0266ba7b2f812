import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Writes the signed checkpoints of the audit trail (migration 0006): each covers the rows of
/// every transaction that ended since the previous one, and moves the heads of the chains it
/// covers to their last covered row (migration 0007).
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
    /// it with `key` and stores it. Returns nil when there is nothing new, or when another
    /// process is taking one right now.
    @discardableResult
    public func take(signingWith key: AuditSigningKey) async throws -> AuditCheckpoint? {
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: self.logger) { connection in
                let locked =
                    try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.lockKey))", logger: self.logger)
                    .collect().first?.decode(Bool.self) ?? false
                guard locked else { return nil }
                let last = try await connection.query(
                    "SELECT seq, txid_to::text, hash FROM revoker.audit_checkpoints ORDER BY seq DESC LIMIT 1",
                    logger: self.logger
                ).collect().first?.decode((Int64, String, Data).self)
                let from = try last.map { try Self.txid($0.1) } ?? 0
                // The horizon: no transaction below it can still commit a row. It is the snapshot's
                // oldest running transaction, except those that run in another database (they
                // cannot write here), so that a long transaction elsewhere on the server does not
                // hold checkpoints back. A transaction whose database is unknown counts as ours.
                let horizon = try await connection.query(
                    """
                    WITH snapshot AS (SELECT pg_current_snapshot() AS s, clock_timestamp() AS taken_at),
                    elsewhere AS (
                        SELECT backend_xid FROM pg_stat_activity
                        WHERE backend_xid IS NOT NULL AND datname IS NOT NULL AND datname <> current_database()
                    )
                    SELECT least(pg_snapshot_xmax(s), (
                               SELECT min(x) FROM pg_snapshot_xip(s) AS x
                               WHERE xid(x) NOT IN (SELECT backend_xid FROM elsewhere)))::text,
                           \(unescaped: SQLTime.micros("taken_at"))
                    FROM snapshot
                    """,
                    logger: self.logger
                ).collect().first?.decode((String, Int64).self)
                guard let horizon else { return nil }
                let to = try Self.txid(horizon.0)
                guard to > from else { return nil }
                var tree = MerkleTree.Builder()
                let rows = try await connection.query(
                    """
                    SELECT hash FROM revoker.audit_events
                    WHERE txid >= \(String(from))::xid8 AND txid < \(String(to))::xid8 ORDER BY id
                    """,
                    logger: self.logger
                )
                for try await hash in rows.decode(Data.self) { tree.append(Array(hash)) }
                guard tree.count > 0 else { return nil }
                let checkpoint = try AuditCheckpoint(
                    seq: (last?.0 ?? 0) + 1,
                    createdAtMicros: horizon.1,
                    txidFrom: from,
                    txidTo: to,
                    rowCount: Int64(tree.count),
                    merkleRoot: tree.root,
                    previousHash: last.map { Array($0.2) } ?? AuditCheckpoint.genesis
                ).signed(with: key)
                try await connection.run(
                    """
                    INSERT INTO revoker.audit_checkpoints
                        (seq, created_at, txid_from, txid_to, row_count, merkle_root, previous_hash, hash, key_id, signature)
                    VALUES (\(checkpoint.seq), timestamptz 'epoch' + \(checkpoint.createdAtMicros) * interval '1 microsecond',
                            \(String(from))::xid8, \(String(to))::xid8, \(checkpoint.rowCount), \(Data(checkpoint.merkleRoot)),
                            \(Data(checkpoint.previousHash)), \(Data(checkpoint.hash)), \(checkpoint.keyID),
                            \(Data(checkpoint.signature)))
                    """,
                    logger: self.logger
                )
                try await connection.run("SELECT revoker.audit_advance_heads()", logger: self.logger)
                return checkpoint
            }
        }
    }

    /// Every stored checkpoint, in order.
    public func all() async throws -> [AuditCheckpoint] {
        try await StoreDatabase.run(logger) {
            var checkpoints: [AuditCheckpoint] = []
            let rows = try await self.client.query(
                """
                SELECT seq, \(unescaped: SQLTime.micros("created_at")),
                       txid_from::text, txid_to::text, row_count, merkle_root, previous_hash, key_id, signature
                FROM revoker.audit_checkpoints ORDER BY seq
                """,
                logger: self.logger
            )
            for try await row in rows.decode((Int64, Int64, String, String, Int64, Data, Data, String, Data).self) {
                checkpoints.append(
                    AuditCheckpoint(
                        seq: row.0,
                        createdAtMicros: row.1,
                        txidFrom: try Self.txid(row.2),
                        txidTo: try Self.txid(row.3),
                        rowCount: row.4,
                        merkleRoot: Array(row.5),
                        previousHash: Array(row.6),
                        keyID: row.7,
                        signature: Array(row.8)
                    )
                )
            }
            return checkpoints
        }
    }

    static func txid(_ text: String) throws -> UInt64 {
        guard let value = UInt64(text) else {
            throw RevokerStoreError(.unexpectedData, "the database returned a transaction id that is not a number")
        }
        return value
    }
}
