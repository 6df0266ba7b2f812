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
        let chain = row.chainKey
        rows += 1
        if row.hash(after: previousHash) != hash {
            problems.append(
                AuditProblem(
                    .changed,
                    "row \(row.id) (chain \(chain), #\(row.chainSeq)): its fields no longer give its hash: changed",
                    rows: [row.id],
                    chain: chain
                )
            )
        }
        if let last, last.key == chain {
            if row.chainSeq != last.seq + 1 {
                let missing = row.chainSeq - last.seq - 1
                problems.append(
                    AuditProblem(
                        .removed,
                        "chain \(chain): \(missing) row(s) #\(last.seq + 1)…#\(row.chainSeq - 1) between rows \(last.id) and \(row.id) are missing",
                        rows: [last.id, row.id],
                        chain: chain
                    )
                )
            } else if previousHash != last.hash {
                problems.append(
                    AuditProblem(
                        .inserted,
                        "row \(row.id) (chain \(chain), #\(row.chainSeq)) does not follow row \(last.id): inserted, or the chain rewritten",
                        rows: [row.id],
                        chain: chain
                    )
                )
            }
            if row.id <= last.id || row.occurredAtMicros + 1_000_000 < last.micros {
                problems.append(
                    AuditProblem(
                        .reordered,
                        "row \(row.id) (chain \(chain), #\(row.chainSeq)) runs against its chain's order (id or time before row \(last.id))",
                        rows: [row.id],
                        chain: chain
                    )
                )
            }
        } else {
            chains += 1
            if row.chainSeq == 1, previousHash != AuditChainRow.genesis {
                problems.append(
                    AuditProblem(.inserted, "row \(row.id) starts chain \(chain) but does not follow its genesis", rows: [row.id], chain: chain)
                )
            } else if row.chainSeq > 1, !partial {
                // Its earlier rows may be archived: checked against the archived heads after the walk.
                continuing.append((chain, row.chainSeq, previousHash, row.id))
            }
        }
        last = (chain, row.chainSeq, row.id, row.occurredAtMicros, hash)
        return problems
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
