import RevokerEvidence

/// Follows rows in (chain, seq) order.
struct ChainWalker {
    /// Verifying from a point in time: a chain's first row seen need not be its first.
    let partial: Bool
    private(set) var rows = 0
    private(set) var chains = 0
    /// Chains whose first row here is not their first.
    private(set) var continuing: [(chain: String, seq: Int64, previous: [UInt8], id: Int64)] = []
    private var last: (key: String, seq: Int64, id: Int64, micros: Int64, hash: [UInt8])?

    init(partial: Bool) {
        self.partial = partial
    }

    mutating func check(_ row: AuditChainRow, previousHash: [UInt8], hash: [UInt8]) -> [AuditProblem] {
        var problems: [AuditProblem] = []
        rows += 1
        if row.hash(after: previousHash) != hash {
            problems.append(Self.changed(row.id, chain: row.chainKey, seq: row.chainSeq))
        }
        let link = Link(chain: row.chainKey, seq: row.chainSeq, id: row.id, micros: row.occurredAtMicros, previous: previousHash)
        problems += follow(link, after: last?.key == row.chainKey ? last.map { ($0.seq, $0.id, $0.micros, $0.hash) } : nil)
        last = (row.chainKey, row.chainSeq, row.id, row.occurredAtMicros, hash)
        return problems
    }

    /// A row as its chain links it to the row before.
    struct Link {
        var chain: String
        var seq: Int64
        var id: Int64
        var micros: Int64
        var previous: [UInt8]
    }

    /// The row before in the same chain: its seq, id, time and hash.
    typealias Before = (seq: Int64, id: Int64, micros: Int64, hash: [UInt8])

    /// Follows `row` from `last`, the row before it in its chain (nil: it starts the chain here).
    mutating func follow(_ row: Link, after last: Before?) -> [AuditProblem] {
        var problems: [AuditProblem] = []
        let chain = row.chain
        if let last {
            if row.seq != last.seq + 1 {
                let missing = row.seq - last.seq - 1
                problems.append(
                    AuditProblem(
                        .removed,
                        "chain \(chain): \(missing) row(s) #\(last.seq + 1)…#\(row.seq - 1) between rows \(last.id) and \(row.id) are missing",
                        rows: [last.id, row.id],
                        chain: chain
                    )
                )
            } else if row.previous != last.hash {
                problems.append(
                    AuditProblem(
                        .inserted,
                        "row \(row.id) (chain \(chain), #\(row.seq)) does not follow row \(last.id): inserted, or the chain rewritten",
                        rows: [row.id],
                        chain: chain
                    )
                )
            }
            if row.id <= last.id || row.micros + 1_000_000 < last.micros {
                problems.append(
                    AuditProblem(
                        .reordered,
                        "row \(row.id) (chain \(chain), #\(row.seq)) runs against its chain's order (id or time before row \(last.id))",
                        rows: [row.id],
                        chain: chain
                    )
                )
            }
        } else {
            chains += 1
            if row.seq == 1, row.previous != AuditChainRow.genesis {
                problems.append(
                    AuditProblem(.inserted, "row \(row.id) starts chain \(chain) but does not follow its genesis", rows: [row.id], chain: chain)
                )
            } else if row.seq > 1, !partial {
                // Its earlier rows may be archived: checked against the archived heads after the walk.
                continuing.append((chain, row.seq, row.previous, row.id))
            }
        }
        return problems
    }

    /// A row whose fields no longer give its hash.
    static func changed(_ id: Int64, chain: String, seq: Int64) -> AuditProblem {
        AuditProblem(.changed, "row \(id) (chain \(chain), #\(seq)): its fields no longer give its hash: changed", rows: [id], chain: chain)
    }
}

extension ChainWalker {
    /// The problems of chains that start here after their first row: none for one that follows
    /// the last row an archive took (migration 0022) exactly.
    static func problems(
        _ continuing: [(chain: String, seq: Int64, previous: [UInt8], id: Int64)],
        archived: [String: (seq: Int64, hash: [UInt8])]
    ) -> [AuditProblem] {
        continuing.compactMap { first in
            guard let head = archived[first.chain] else {
                return AuditProblem(
                    .removed,
                    "chain \(first.chain): rows #1…#\(first.seq - 1) before row \(first.id) are missing",
                    rows: [first.id],
                    chain: first.chain
                )
            }
            if first.seq == head.seq + 1, first.previous == head.hash { return nil }
            return AuditProblem(
                first.seq > head.seq + 1 ? .removed : .inserted,
                "chain \(first.chain): row \(first.id) (#\(first.seq)) does not follow the chain's last archived row (#\(head.seq))",
                rows: [first.id],
                chain: first.chain
            )
        }
    }
}
