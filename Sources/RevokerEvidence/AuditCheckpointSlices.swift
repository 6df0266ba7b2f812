/// Which checkpoint's slice holds a transaction: checkpoints taken apart once, for a lookup
/// per row (the verifier's, a receipt's, an archive's).
public struct AuditCheckpointSlices: Sendable {
    public let from: [UInt64]
    public let to: [UInt64]
    public let open: [Set<UInt64>]
    public let late: [Set<UInt64>]
    public let createdAt: [Int64]

    public init(_ checkpoints: [AuditCheckpoint]) {
        from = checkpoints.map(\.txidFrom)
        to = checkpoints.map(\.txidTo)
        open = checkpoints.map { Set($0.openTxids) }
        late = checkpoints.map { Set($0.lateTxids) }
        createdAt = checkpoints.map(\.createdAtMicros)
    }

    /// The index of the checkpoint whose slice holds `txid`: the first whose range reaches past
    /// it (by binary search), or a later one that took it late because it was open then.
    public func slice(of txid: UInt64) -> Int? {
        var low = 0
        var high = to.count
        while low < high {
            let middle = (low + high) / 2
            if to[middle] <= txid { low = middle + 1 } else { high = middle }
        }
        while low < to.count {
            if (from[low] <= txid && txid < to[low] || late[low].contains(txid)) && !open[low].contains(txid) { return low }
            guard open[low].contains(txid) else { return nil }
            low += 1
        }
        return nil
    }
}
