import Crypto
import Foundation

extension AuditArchive {
    /// What an archive file holds, signed with the audit key by the archiver and carried on its
    /// end line: the header's months, boundary and time; the counts of rows, chains, checkpoints,
    /// leaves and chain starts; the first and last row and checkpoint; a digest of the start lines.
    /// Checkpoints sign their own rows only, so without it a file cut at a checkpoint and recounted
    /// would still verify.
    public struct Extent: Codable, Sendable, Hashable {
        public var before: String
        public var months: [String]
        public var createdAt: String
        public var rows: Int
        public var chains: Int
        public var firstID: Int64?
        public var lastID: Int64?
        public var checkpoints: Int
        public var firstCheckpoint: Int64?
        /// Hex SHA-256 of the first checkpoint (what its successor names as previous).
        public var firstCheckpointHash: String?
        public var lastCheckpoint: Int64?
        public var lastCheckpointHash: String?
        public var leaves: Int
        public var starts: Int
        /// Hex SHA-256 over the start lines (chain, seq, hash), in file order.
        public var startsDigest: String
        public var keyID: String = ""
        /// Base64 Ed25519 signature of ``message``.
        public var signature: String = ""

        enum CodingKeys: String, CodingKey {
            case before, months
            case createdAt = "created_at"
            case rows, chains
            case firstID = "first_id"
            case lastID = "last_id"
            case checkpoints
            case firstCheckpoint = "first_checkpoint"
            case firstCheckpointHash = "first_checkpoint_hash"
            case lastCheckpoint = "last_checkpoint"
            case lastCheckpointHash = "last_checkpoint_hash"
            case leaves, starts
            case startsDigest = "starts_sha256"
            case keyID = "key_id"
            case signature
        }

        /// The bytes signed.
        public var message: [UInt8] {
            var encoder = CanonicalEncoder(domain: "revoker.audit.archive-extent.v1")
            encoder.append(before)
            encoder.append(String(months.count))
            for month in months { encoder.append(month) }
            encoder.append(createdAt)
            encoder.append(String(rows))
            encoder.append(String(chains))
            encoder.append(firstID.map(String.init))
            encoder.append(lastID.map(String.init))
            encoder.append(String(checkpoints))
            encoder.append(firstCheckpoint.map(String.init))
            encoder.append(firstCheckpointHash)
            encoder.append(lastCheckpoint.map(String.init))
            encoder.append(lastCheckpointHash)
            encoder.append(String(leaves))
            encoder.append(String(starts))
            encoder.append(startsDigest)
            encoder.append(keyID)
            return encoder.bytes
        }

        /// This extent, named and signed by `key`.
        public func signed(with key: AuditSigningKey) throws -> Extent {
            var extent = self
            extent.keyID = key.publicKey.keyID
            extent.signature = Data(try key.sign(extent.message)).base64EncodedString()
            return extent
        }

        /// Whether one of `keys` (by key id) made the signature.
        public func isSigned(byOneOf keys: [AuditPublicKey]) -> Bool {
            let signature = Data(base64Encoded: signature).map(Array.init) ?? []
            return keys.contains { $0.keyID == keyID && $0.isValid(signature: signature, for: message) }
        }

        /// Each field where `self` (signed) and `found` (what the file holds) differ, named.
        func differences(from found: Extent) -> [String] {
            func text<T>(_ value: T?) -> String { value.map { "\($0)" } ?? "none" }
            let fields: [(String, String, String)] = [
                ("the boundary (before)", before, found.before),
                ("the months", months.joined(separator: ", "), found.months.joined(separator: ", ")),
                ("the creation time", createdAt, found.createdAt),
                ("rows", String(rows), String(found.rows)),
                ("chains", String(chains), String(found.chains)),
                ("the first row", text(firstID), text(found.firstID)),
                ("the last row", text(lastID), text(found.lastID)),
                ("checkpoints", String(checkpoints), String(found.checkpoints)),
                ("the first checkpoint", text(firstCheckpoint), text(found.firstCheckpoint)),
                ("the first checkpoint's hash", text(firstCheckpointHash), text(found.firstCheckpointHash)),
                ("the last checkpoint", text(lastCheckpoint), text(found.lastCheckpoint)),
                ("the last checkpoint's hash", text(lastCheckpointHash), text(found.lastCheckpointHash)),
                ("leaf lines", String(leaves), String(found.leaves)),
                ("chain start lines", String(starts), String(found.starts)),
                ("the chain start lines' SHA-256", startsDigest, found.startsDigest),
            ]
            return fields.filter { $0.1 != $0.2 }.map { "the signed extent says \($0.0) \($0.1.prefix(200)); the file holds \($0.2.prefix(200))" }
        }
    }

    /// What a file holds, counted line by line as it is written or read: its ``Extent``.
    public struct Tally {
        var header: (before: String, months: [String], createdAt: String)?
        var rows = 0
        var firstID: Int64?
        var lastID: Int64?
        var checkpoints = 0
        var first: AuditCheckpoint?
        var last: AuditCheckpoint?
        var leaves = 0
        var starts = 0
        var startsDigest = SHA256()

        public init() {}

        /// Counts `line` (the end line counts nothing: it states the counts).
        public mutating func count(_ line: Line) {
            switch line.type {
            case .header:
                header = (line.before ?? "", line.months ?? [], line.createdAt ?? "")
            case .checkpoint:
                guard let checkpoint = line.checkpoint?.checkpoint else { return }
                checkpoints += 1
                first = first ?? checkpoint
                last = checkpoint
            case .leaf:
                leaves += 1
            case .row:
                rows += 1
                if let id = line.row?.id {
                    firstID = firstID ?? id
                    lastID = id
                }
            case .start:
                starts += 1
                var encoder = CanonicalEncoder(domain: "")
                encoder.append(line.chain)
                encoder.append(line.seq.map(String.init))
                encoder.append(line.hash)
                startsDigest.update(data: encoder.bytes)
            case .end:
                break
            }
        }

        /// The extent counted so far (unsigned), with `chains` counted by the caller.
        public func extent(chains: Int) -> Extent {
            Extent(
                before: header?.before ?? "",
                months: header?.months ?? [],
                createdAt: header?.createdAt ?? "",
                rows: rows,
                chains: chains,
                firstID: firstID,
                lastID: lastID,
                checkpoints: checkpoints,
                firstCheckpoint: first?.seq,
                firstCheckpointHash: first?.hash.hex,
                lastCheckpoint: last?.seq,
                lastCheckpointHash: last?.hash.hex,
                leaves: leaves,
                starts: starts,
                startsDigest: Data(startsDigest.finalize()).hex
            )
        }
    }

    /// The SHA-256 of the file's bytes (what the trail records of an archive), read in constant memory.
    public static func sha256(path: String) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw AuditEvidenceError("\(path) cannot be read") }
        defer { try? handle.close() }
        var digest = SHA256()
        while let data = try handle.read(upToCount: 1 << 20), !data.isEmpty { digest.update(data: data) }
        return Array(digest.finalize())
    }
}
