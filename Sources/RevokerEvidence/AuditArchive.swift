import Foundation

/// Months of the audit trail taken out of the database (`revoker audit archive`): a gzip file
/// of JSON lines that anyone checks offline with the audit public key.
///
/// In order: a header; every checkpoint that covers an archived row, signed; the leaves (id,
/// hash) of those checkpoints' rows that are not in this file (still in the database, or in an
/// earlier archive), so each Merkle root can be recomputed; the rows in id order, each with its
/// previous hash and hash; the chains that continue from an earlier archive (their last row
/// there); and an end line with the counts and the file's ``Extent``, signed, so that neither a
/// truncated file nor one cut and recounted is taken for the whole.
public enum AuditArchive {
    public static let format = "revoker.audit.archive.v2"
    /// Files written before the extent was signed: read, but their extent is reported unsigned.
    public static let unsignedExtentFormat = "revoker.audit.archive.v1"

    /// One line of the file.
    public struct Line: Codable, Sendable {
        public enum Kind: String, Codable, Sendable { case header, checkpoint, leaf, row, start, end }
        public var type: Kind
        // header
        public var format: String?
        public var before: String?
        public var months: [String]?
        public var createdAt: String?
        // checkpoint
        public var checkpoint: AuditCheckpointRecord?
        // leaf (checkpoint seq, id, hash), start (chain, seq, hash), row (row, previous hash, hash)
        public var seq: Int64?
        public var id: Int64?
        public var chain: String?
        public var row: AuditChainRow?
        public var previousHash: String?
        public var hash: String?
        // end
        public var rows: Int?
        public var chains: Int?
        public var extent: Extent?

        enum CodingKeys: String, CodingKey {
            case type, format, before, months
            case createdAt = "created_at"
            case checkpoint, seq, id, chain, row
            case previousHash = "previous_hash"
            case hash, rows, chains, extent
        }

        public init(type: Kind) { self.type = type }

        public static func header(before: String, months: [String], createdAt: String) -> Line {
            var line = Line(type: .header)
            (line.format, line.before, line.months, line.createdAt) = (AuditArchive.format, before, months, createdAt)
            return line
        }

        public static func checkpoint(_ checkpoint: AuditCheckpoint) -> Line {
            var line = Line(type: .checkpoint)
            line.checkpoint = AuditCheckpointRecord(checkpoint)
            return line
        }

        public static func leaf(checkpoint: Int64, id: Int64, hash: [UInt8]) -> Line {
            var line = Line(type: .leaf)
            (line.seq, line.id, line.hash) = (checkpoint, id, hash.hex)
            return line
        }

        public static func row(_ row: AuditChainRow, previous: [UInt8], hash: [UInt8]) -> Line {
            var line = Line(type: .row)
            (line.row, line.previousHash, line.hash) = (row, previous.hex, hash.hex)
            return line
        }

        public static func start(chain: String, seq: Int64, hash: [UInt8]) -> Line {
            var line = Line(type: .start)
            (line.chain, line.seq, line.hash) = (chain, seq, hash.hex)
            return line
        }

        public static func end(rows: Int, chains: Int, extent: Extent) -> Line {
            var line = Line(type: .end)
            (line.rows, line.chains, line.extent) = (rows, chains, extent)
            return line
        }

        public func json() throws -> String {
            String(decoding: try AuditArchive.encoder.encode(self), as: UTF8.self)
        }
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// What `verify` found.
    public struct Verification: Sendable {
        public var format: String?
        public var before: String?
        public var months: [String] = []
        public var rows = 0
        public var chains = 0
        public var checkpoints = 0
        /// What the file holds, as counted (its signed extent must say the same).
        public var extent: Extent?
        public var problems: [String] = []
        /// A file of the format before extents were signed: its rows, chains and checkpoints
        /// check, but a cut at a checkpoint and a recount would not show.
        public var unsignedExtent: Bool { format == AuditArchive.unsignedExtentFormat }
        /// No problem found; for an ``unsignedExtent`` file that is not yet proof that it is whole.
        public var valid: Bool { problems.isEmpty }
    }

    /// Checks every row's hash and chain, each checkpoint's signature (by one of `keys`), its link
    /// to the one before it in the file, its row count and Merkle root, that the file is whole,
    /// and that its signed extent (by one of `keys`) is what the file holds. Without `keys` the
    /// signatures are not checked (the archiver checking what it wrote).
    public static func verify(path: String, keys: [AuditPublicKey]?) throws -> Verification {
        var result = Verification()
        var state = Reading()
        try read(path) { line, number in
            state.tally.count(line)
            switch line.type {
            case .header:
                guard number == 1, let found = line.format, [format, unsignedExtentFormat].contains(found) else {
                    result.problems.append(
                        "line \(number): not an audit archive header (format '\(line.format?.prefix(60) ?? "none")'; "
                            + "this revoker reads \(format) and \(unsignedExtentFormat))"
                    )
                    return
                }
                (result.format, result.before, result.months) = (found, line.before, line.months ?? [])
            case .checkpoint:
                guard let checkpoint = line.checkpoint?.checkpoint else { throw AuditEvidenceError("line \(number): a malformed checkpoint") }
                if let keys, !checkpoint.isSigned(byOneOf: keys) {
                    result.problems.append("checkpoint \(checkpoint.seq) is not signed by a key given (or its signature does not match)")
                }
                if let last = state.checkpoints.last,
                    checkpoint.seq != last.seq + 1 || checkpoint.previousHash != last.hash || checkpoint.txidFrom != last.txidTo
                {
                    result.problems.append("checkpoint \(checkpoint.seq) does not continue checkpoint \(last.seq)")
                }
                state.checkpoints.append(checkpoint)
            case .leaf, .row, .start, .end:
                try state.take(line, number: number, problems: &result.problems)
            }
        }
        result.problems += state.finish()
        (result.rows, result.chains, result.checkpoints) = (state.rowCount, state.lastInChain.count, state.checkpoints.count)
        let extent = state.tally.extent(chains: state.lastInChain.count)
        result.extent = extent
        if result.format == format, state.ended != nil {
            result.problems += extentProblems(state.signedExtent, found: extent, keys: keys)
        }
        if result.before == nil { result.problems.insert("the file has no header: it is not an audit archive", at: 0) }
        return result
    }

    /// What is wrong with a file's signed extent: missing, signed by no key of `keys` (when given),
    /// or not what the file holds.
    static func extentProblems(_ signed: Extent?, found: Extent, keys: [AuditPublicKey]?) -> [String] {
        guard let signed else { return ["the end line carries no signed extent: what the file holds is not signed"] }
        var problems: [String] = []
        if let keys, !signed.isSigned(byOneOf: keys) {
            problems.append(
                "the extent (what the file holds) is not signed by a key given (key \(signed.keyID.prefix(16))), or its signature does not match"
            )
        }
        return problems + signed.differences(from: found)
    }

    /// A receipt for request `requestID` from the archive's rows, each proven into its signed
    /// checkpoint as a receipt from the database is; nil when the archive has no row of it.
    public static func receipt(path: String, requestID: UUID, key: AuditSigningKey, issuedAtMicros: Int64) throws -> AuditReceipt? {
        var state = Reading(keepLeaves: true)
        let chain = requestID.uuidString.lowercased()
        var rows: [(row: AuditChainRow, previous: String, hash: String)] = []
        var problems: [String] = []
        var fileFormat: String?
        try read(path) { line, number in
            state.tally.count(line)
            switch line.type {
            case .header: fileFormat = line.format
            case .checkpoint:
                guard let checkpoint = line.checkpoint?.checkpoint else { throw AuditEvidenceError("line \(number): a malformed checkpoint") }
                state.checkpoints.append(checkpoint)
            case .leaf, .row, .start, .end:
                try state.take(line, number: number, problems: &problems)
                if line.type == .row, let row = line.row, row.chainKey == chain {
                    rows.append((row, line.previousHash ?? "", line.hash ?? ""))
                }
            }
        }
        problems += state.finish()
        // Signatures are for `verify-archive`; what the file holds must still be what it states.
        if fileFormat == format, state.ended != nil {
            problems += extentProblems(state.signedExtent, found: state.tally.extent(chains: state.lastInChain.count), keys: nil)
        }
        guard problems.isEmpty else {
            throw AuditEvidenceError("the archive does not verify (\(problems.first ?? "")): run `revoker audit verify-archive`")
        }
        guard !rows.isEmpty else { return nil }
        var used: [Int] = []
        let events = try rows.map { row in
            guard let index = state.slices.slice(of: row.row.txid), let leaves = state.leaves[index],
                let leaf = leaves.firstIndex(where: { $0.id == row.row.id })
            else { throw AuditEvidenceError("row \(row.row.id) lies under no checkpoint of the archive") }
            if !used.contains(index) { used.append(index) }
            return AuditReceipt.Event(
                row: row.row,
                previousHash: row.previous,
                hash: row.hash,
                checkpoint: state.checkpoints[index].seq,
                leafIndex: leaf,
                path: MerkleTree.path(for: leaf, in: leaves.map(\.hash)).map(\.hex)
            )
        }
        return try AuditReceipt.issue(
            events: events,
            checkpoints: used.sorted().map { state.checkpoints[$0] },
            issuedAtMicros: issuedAtMicros,
            key: key
        )
    }

    private static func read(_ path: String, _ body: (Line, Int) throws -> Void) throws {
        let decoder = JSONDecoder()
        var number = 0
        try GzipLineReader.forEachLine(path) { text in
            number += 1
            guard !text.isEmpty else { return }
            let line: Line
            do {
                line = try decoder.decode(Line.self, from: Data(text.utf8))
            } catch {
                throw AuditEvidenceError("line \(number) of \(path) is not an archive line")
            }
            try body(line, number)
        }
    }

    /// The checks that follow the rows through the file: chains, slices and Merkle trees.
    struct Reading {
        var checkpoints: [AuditCheckpoint] = []
        /// Taken apart once the checkpoints are all read (they come before the leaves and rows).
        var built: AuditCheckpointSlices?
        var slices: AuditCheckpointSlices {
            mutating get {
                if let built, built.to.count == checkpoints.count { return built }
                let slices = AuditCheckpointSlices(checkpoints)
                built = slices
                return slices
            }
        }
        /// Per checkpoint index: the leaves not in the file, ascending by id, and how many are used.
        var outside: [Int: [(id: Int64, hash: [UInt8])]] = [:]
        var outsideUsed: [Int: Int] = [:]
        var trees: [Int: MerkleTree.Builder] = [:]
        /// With `keepLeaves`, every checkpoint's leaves in id order (for receipts' paths).
        let keepLeaves: Bool
        var leaves: [Int: [(id: Int64, hash: [UInt8])]] = [:]
        var lastInChain: [String: (seq: Int64, hash: [UInt8])] = [:]
        /// Chains whose first row here is not their first: checked against the start lines.
        var continuing: [String: (seq: Int64, previous: [UInt8], id: Int64)] = [:]
        var starts: [String: (seq: Int64, hash: [UInt8])] = [:]
        var rowCount = 0
        var lastID: Int64 = .min
        var ended: (rows: Int, chains: Int)?
        var signedExtent: Extent?
        var tally = Tally()

        init(keepLeaves: Bool = false) {
            self.keepLeaves = keepLeaves
        }

        mutating func take(_ line: Line, number: Int, problems: inout [String]) throws {
            guard ended == nil else {
                problems.append("line \(number) follows the end line")
                return
            }
            switch line.type {
            case .leaf:
                guard let seq = line.seq, let id = line.id, let hash = line.hash.flatMap({ [UInt8](hex: $0) }),
                    let index = checkpoints.firstIndex(where: { $0.seq == seq })
                else { throw AuditEvidenceError("line \(number): a leaf of no checkpoint in the archive") }
                outside[index, default: []].append((id, hash))
            case .row:
                guard let row = line.row, let previous = line.previousHash.flatMap({ [UInt8](hex: $0) }),
                    let hash = line.hash.flatMap({ [UInt8](hex: $0) })
                else { throw AuditEvidenceError("line \(number): a malformed row") }
                append(row, previous: previous, hash: hash, problems: &problems)
            case .start:
                guard let chain = line.chain, let seq = line.seq, let hash = line.hash.flatMap({ [UInt8](hex: $0) }) else {
                    throw AuditEvidenceError("line \(number): a malformed chain start")
                }
                starts[chain] = (seq, hash)
            case .end:
                ended = (line.rows ?? -1, line.chains ?? -1)
                signedExtent = line.extent
            case .header, .checkpoint:
                problems.append("line \(number): a \(line.type.rawValue) among the rows")
            }
        }

        private mutating func append(_ row: AuditChainRow, previous: [UInt8], hash: [UInt8], problems: inout [String]) {
            rowCount += 1
            let chain = row.chainKey
            if row.hash(after: previous) != hash {
                problems.append("row \(row.id) (chain \(chain), #\(row.chainSeq)): its fields no longer give its hash: changed")
            }
            if row.id <= lastID { problems.append("row \(row.id) is out of id order") }
            lastID = row.id
            if let last = lastInChain[chain] {
                if row.chainSeq != last.seq + 1 || previous != last.hash {
                    problems.append("row \(row.id) (chain \(chain), #\(row.chainSeq)) does not follow the chain's row #\(last.seq)")
                }
            } else if row.chainSeq != 1 || previous != AuditChainRow.genesis {
                continuing[chain] = (row.chainSeq, previous, row.id)
            }
            lastInChain[chain] = (row.chainSeq, hash)
            guard let index = slices.slice(of: row.txid) else {
                problems.append("row \(row.id) lies under no checkpoint of the archive")
                return
            }
            flushOutside(index, before: row.id)
            add(index, id: row.id, hash: hash)
        }

        /// The checkpoint's leaves from outside the file that come before `id`, in order.
        private mutating func flushOutside(_ index: Int, before id: Int64) {
            guard let leaves = outside[index] else { return }
            var used = outsideUsed[index] ?? 0
            while used < leaves.count, leaves[used].id < id {
                add(index, id: leaves[used].id, hash: leaves[used].hash)
                used += 1
            }
            outsideUsed[index] = used
        }

        private mutating func add(_ index: Int, id: Int64, hash: [UInt8]) {
            trees[index, default: MerkleTree.Builder()].append(hash)
            if keepLeaves { leaves[index, default: []].append((id, hash)) }
        }

        mutating func finish() -> [String] {
            var problems: [String] = []
            guard let ended else { return ["the file ends before its end line: truncated"] }
            for index in outside.keys { flushOutside(index, before: .max) }
            for (chain, first) in continuing {
                guard let start = starts[chain] else {
                    problems.append(
                        "chain \(chain): its first row here (\(first.id), #\(first.seq)) follows no row of this archive or an earlier one"
                    )
                    continue
                }
                if first.seq != start.seq + 1 || first.previous != start.hash {
                    problems.append("chain \(chain): row \(first.id) does not follow its last row in an earlier archive (#\(start.seq))")
                }
            }
            for (index, checkpoint) in checkpoints.enumerated() {
                let tree = trees[index] ?? MerkleTree.Builder()
                if tree.count != checkpoint.rowCount || tree.root != checkpoint.merkleRoot {
                    problems.append(
                        "checkpoint \(checkpoint.seq): \(tree.count) rows found for the \(checkpoint.rowCount) it signed, or not the same rows"
                    )
                }
            }
            if ended.rows != rowCount || ended.chains != lastInChain.count {
                problems.append(
                    "the end line counts \(ended.rows) rows in \(ended.chains) chains; the file holds \(rowCount) in \(lastInChain.count)"
                )
            }
            return problems
        }
    }
}
