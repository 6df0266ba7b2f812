import Foundation
import PostgresNIO
import RevokerEvidence

/// The whole trail's verification (no `--since`, no `--client-id`): one read by id that rehashes
/// each row from its cells' bytes, beside one statement in which the server follows every chain.
extension AuditVerifier {
    /// The columns a whole verification reads by id: the previous hash, the hash, then every
    /// field the hash covers as `revoker.audit_row_hash` casts it to text, so that their bytes
    /// are hashed as they come.
    static let hashedColumns = """
        prev_hash, hash, chain_key, chain_seq::text, id::text, \(SQLTime.micros("occurred_at"))::text, txid::text,
        request_id::text, client_id, external_reference, apple_user_id, event, attempt::text, actor, apple_endpoint,
        http_status::text, apple_error, apple_error_description, latency_ms::text, detail, recorded_by
        """

    /// Follows every chain of the whole trail on the server, in one sort of it: each row beside
    /// the one before it in its chain (`lag`, a built-in, over the stored values; no stored
    /// function) and beside its chain's recorded head. Only the rows that do not plainly follow
    /// come back, judged then as the walk by chain (``ChainWalker/follow(_:after:)``) and
    /// ``checkHeads(clientID:since:last:problems:)`` judge them. Each row's own hash is rehashed
    /// by the read by id.
    ///
    /// `chainsBesides`: chains that start at a row other than #1, less rows #1 that do not start
    /// one (added to the rows #1 the read by id counts, the number of chains).
    func followChainsOnServer(last checkpoint: AuditCheckpoint?) async throws -> (problems: [AuditProblem], chainsBesides: Int) {
        let micros = SQLTime.micros("occurred_at")
        let covered = String(checkpoint?.txidTo ?? 0)
        let open = (checkpoint?.openTxids ?? []).map(String.init)
        let sql: PostgresQuery = """
            SELECT * FROM (
                SELECT l.chain_key, l.chain_seq, l.id, l.micros, l.prev_hash, l.last_seq, l.last_id, l.last_micros, l.last_hash,
                       h.last_seq AS head_seq,
                       (h.archived_seq IS NULL OR h.last_seq > h.archived_seq) AND l.chain_seq = h.last_seq
                           AND l.hash IS DISTINCT FROM h.last_hash AS head_rewritten,
                       l.next_seq IS NULL AND l.chain_seq < h.last_seq AS short,
                       l.chain_seq > coalesce(h.last_seq, 0) AND l.txid < \(covered)::xid8
                           AND l.txid <> ALL(\(open)::text[]::xid8[]) AS beyond
                FROM (
                    SELECT chain_key, chain_seq, id, \(unescaped: micros) AS micros, prev_hash, hash, txid,
                           lag(chain_seq) OVER w AS last_seq, lag(id) OVER w AS last_id,
                           lag(\(unescaped: micros)) OVER w AS last_micros, lag(hash) OVER w AS last_hash,
                           lead(chain_seq) OVER w AS next_seq
                    FROM revoker.audit_events
                    WINDOW w AS (PARTITION BY chain_key ORDER BY chain_seq)
                ) AS l
                LEFT JOIN revoker.audit_chains h ON h.chain_key = l.chain_key
            ) AS r
            WHERE head_rewritten OR short OR beyond
               OR CASE WHEN last_seq IS NULL THEN chain_seq <> 1 OR prev_hash IS DISTINCT FROM decode(repeat('00', 32), 'hex')
                       ELSE chain_seq <> last_seq + 1 OR prev_hash IS DISTINCT FROM last_hash OR id <= last_id
                            OR micros + 1000000 < last_micros END
            """
        // Heads with no row left at all (not archived whole): by the chains' index alone.
        let emptied: PostgresQuery = """
            SELECT h.chain_key, h.last_seq FROM revoker.audit_chains h
            WHERE (h.archived_seq IS NULL OR h.last_seq > h.archived_seq)
              AND NOT EXISTS (SELECT 1 FROM revoker.audit_events e WHERE e.chain_key = h.chain_key)
            ORDER BY 1
            """
        async let removed = client.query(emptied, logger: logger).collect()
        let found = try await client.withTransaction(logger: logger) { connection in
            // A sort of the whole trail: in memory rather than in files where it fits.
            try await connection.query("SET LOCAL work_mem = '256MB'", logger: logger)
            try await connection.query("SET LOCAL jit = off", logger: logger)
            return try await connection.query(sql, logger: logger).collect()
        }
        var walker = ChainWalker(partial: false)
        var problems: [AuditProblem] = []
        var heads: [String: [AuditProblem]] = [:]
        var beyond: [String: (row: Int64, head: Int64?)] = [:]
        var besides = 0
        for row in found {
            let cells = try row.decode((String, Int64, Int64, Int64, Data, Int64?, Int64?, Int64?, Data?, Int64?, Bool?, Bool?, Bool?).self)
            let link = ChainWalker.Link(chain: cells.0, seq: cells.1, id: cells.2, micros: cells.3, previous: Array(cells.4))
            let before = cells.5.map { (seq: $0, id: cells.6 ?? 0, micros: cells.7 ?? 0, hash: Array(cells.8 ?? Data())) }
            if before == nil, link.seq != 1 { besides += 1 }
            if before != nil, link.seq == 1 { besides -= 1 }
            problems += walker.follow(link, after: before)
            if let head = cells.9, cells.11 == true {
                heads[link.chain, default: []].append(Self.missingFromEnd(link.chain, last: link.seq, head: head))
            }
            if let head = cells.9, cells.10 == true {
                heads[link.chain, default: []].append(Self.headRewritten(link.chain, head: head, row: link.id))
            }
            if cells.12 == true, beyond[link.chain].map({ link.id < $0.row }) ?? true {
                beyond[link.chain] = (link.id, cells.9)
            }
        }
        for (chain, found) in beyond { heads[chain, default: []].append(Self.beyondHead(chain, row: found.row, head: found.head)) }
        for row in try await removed {
            let (chain, head) = try row.decode((String, Int64).self)
            heads[chain, default: []].append(Self.removedWhole(chain, head: head))
        }
        if !walker.continuing.isEmpty {
            let archived = try await AuditCheckpoints.archivedHeads(walker.continuing.map(\.chain), client: client, logger: logger)
            problems += ChainWalker.problems(walker.continuing, archived: archived)
        }
        return (problems + heads.sorted { $0.key < $1.key }.flatMap(\.value), besides)
    }

    static func removedWhole(_ chain: String, head: Int64) -> AuditProblem {
        AuditProblem(.removed, "chain \(chain): all \(head) rows its head records are missing", chain: chain)
    }

    static func missingFromEnd(_ chain: String, last: Int64, head: Int64) -> AuditProblem {
        AuditProblem(.removed, "chain \(chain): rows #\(last + 1)…#\(head) are missing from its end (its head records #\(head))", chain: chain)
    }

    static func headRewritten(_ chain: String, head: Int64, row: Int64?) -> AuditProblem {
        AuditProblem(
            .changed,
            "chain \(chain): its row #\(head) is not the one its head records: rewritten",
            rows: row.map { [$0] } ?? [],
            chain: chain
        )
    }

    static func beyondHead(_ chain: String, row: Int64, head: Int64?) -> AuditProblem {
        let message =
            head.map { "chain \(chain): row \(row) lies under a checkpoint but beyond the head it recorded (#\($0))" }
            ?? "chain \(chain): row \(row) lies under a checkpoint but its chain has no recorded head: written without the trigger"
        return AuditProblem(.inserted, message, rows: [row], chain: chain)
    }

    /// The whole trail's rows by id (``hashedColumns``), each rehashed from its cells' bytes.
    struct WholeRead {
        private var hasher = AuditRowHasher()
        private(set) var rows = 0
        private(set) var firstRows = 0
        private(set) var changed: [AuditProblem] = []

        /// Rehashes `row`; returns its id, transaction, time and stored hash.
        mutating func read(_ row: PostgresRow) throws -> (id: Int64, txid: UInt64, micros: Int64, hash: [UInt8]) {
            var cells = row.makeIterator()
            guard let previous = cells.next()?.bytes, let stored = cells.next()?.bytes else {
                throw RevokerStoreError(.unexpectedData, "an audit row came without its hashes")
            }
            previous.withUnsafeReadableBytes { hasher.start(after: $0) }
            var (seq, id, micros, txid): (Int64, Int64, Int64, UInt64) = (0, 0, 0, 0)
            var chain: ByteBuffer?
            for index in 0..<19 {
                guard let cell = cells.next() else { throw RevokerStoreError(.unexpectedData, "an audit row came without its fields") }
                if let bytes = cell.bytes {
                    bytes.withUnsafeReadableBytes { hasher.append($0) }
                } else {
                    hasher.append(nil)
                }
                switch index {
                case 0: chain = cell.bytes
                case 1: seq = try Self.integer(cell.bytes)
                case 2: id = try Self.integer(cell.bytes)
                case 3: micros = try Self.integer(cell.bytes)
                case 4: txid = try Self.natural(cell.bytes)
                default: break
                }
            }
            rows += 1
            if seq == 1 { firstRows += 1 }
            if !stored.withUnsafeReadableBytes({ hasher.matches($0) }) {
                changed.append(ChainWalker.changed(id, chain: chain.map { String(buffer: $0) } ?? "", seq: seq))
            }
            return (id, txid, micros, Array(stored.readableBytesView))
        }

        /// A whole number written in ASCII, as `::text` writes one.
        private static func integer(_ bytes: ByteBuffer?) throws -> Int64 {
            let negative = bytes?.readableBytesView.first == UInt8(ascii: "-")
            var digits = bytes
            if negative { digits?.moveReaderIndex(forwardBy: 1) }
            guard let magnitude = Int64(exactly: try natural(digits)) else {
                throw RevokerStoreError(.unexpectedData, "the database returned a number out of range")
            }
            return negative ? -magnitude : magnitude
        }

        /// A number of ASCII digits, as `::text` writes a count or a transaction id.
        private static func natural(_ bytes: ByteBuffer?) throws -> UInt64 {
            let parsed = bytes?.withUnsafeReadableBytes { digits -> UInt64? in
                guard !digits.isEmpty else { return nil }
                var value: UInt64 = 0
                for digit in digits {
                    guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
                    let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                    let (sum, carry) = times.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                    guard !overflow, !carry else { return nil }
                    value = sum
                }
                return value
            }
            guard let parsed else { throw RevokerStoreError(.unexpectedData, "the database returned a number that is not one") }
            return parsed
        }
    }
}
