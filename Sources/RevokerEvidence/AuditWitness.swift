import Foundation

/// A signed checkpoint as JSON, complete enough to check its signature anywhere: what receipts
/// carry, what `audit.checkpoint` events and witness files hold, what `revoker audit checkpoint
/// --json` prints.
public struct AuditCheckpointRecord: Codable, Sendable, Hashable {
    public var seq: Int64
    public var createdAtMicros: Int64
    public var txidFrom: UInt64
    public var txidTo: UInt64
    public var rowCount: Int64
    public var merkleRoot: String
    public var previousHash: String
    /// Absent when empty, so that receipts issued before these lists keep their bytes.
    public var openTxids: [UInt64]?
    public var lateTxids: [UInt64]?
    public var keyID: String
    public var signature: String

    enum CodingKeys: String, CodingKey {
        case seq
        case createdAtMicros = "created_at_us"
        case txidFrom = "txid_from"
        case txidTo = "txid_to"
        case rowCount = "row_count"
        case merkleRoot = "merkle_root"
        case previousHash = "previous_hash"
        case openTxids = "open_txids"
        case lateTxids = "late_txids"
        case keyID = "key_id"
        case signature
    }

    public init(_ checkpoint: AuditCheckpoint) {
        seq = checkpoint.seq
        createdAtMicros = checkpoint.createdAtMicros
        txidFrom = checkpoint.txidFrom
        txidTo = checkpoint.txidTo
        rowCount = checkpoint.rowCount
        merkleRoot = checkpoint.merkleRoot.hex
        previousHash = checkpoint.previousHash.hex
        openTxids = checkpoint.openTxids.isEmpty ? nil : checkpoint.openTxids
        lateTxids = checkpoint.lateTxids.isEmpty ? nil : checkpoint.lateTxids
        keyID = checkpoint.keyID
        signature = Data(checkpoint.signature).base64EncodedString()
    }

    /// The checkpoint, or nil when a field is malformed.
    public var checkpoint: AuditCheckpoint? {
        guard let root = [UInt8](hex: merkleRoot), let previous = [UInt8](hex: previousHash),
            let signature = Data(base64Encoded: signature)
        else { return nil }
        return AuditCheckpoint(
            seq: seq,
            createdAtMicros: createdAtMicros,
            txidFrom: txidFrom,
            txidTo: txidTo,
            rowCount: rowCount,
            merkleRoot: root,
            previousHash: previous,
            openTxids: openTxids ?? [],
            lateTxids: lateTxids ?? [],
            keyID: keyID,
            signature: Array(signature)
        )
    }

    /// One line of JSON (sorted keys), as witness files hold it.
    public func jsonLine() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}

/// Checkpoints kept outside the database, where its owner cannot rewrite them: a file the
/// service appends to, a directory of files, the `audit.checkpoint` events an app backend
/// received, the output of `revoker audit checkpoint --json`. They let a signer refuse to extend
/// a rewritten history and an auditor detect the newest checkpoints removed with their rows.
public enum AuditWitness {
    /// Every checkpoint held at `path` (a file, or a directory whose files are read), by seq.
    /// Files may hold JSON lines, one JSON document, or arrays; any object with a checkpoint's
    /// fields counts, also when nested (an event's `data.checkpoint`, a feed page's `events`).
    public static func read(_ path: String) throws -> [AuditCheckpoint] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AuditEvidenceError("the witness '\(path)' does not exist")
        }
        var files = [path]
        if isDirectory.boolValue {
            let names = try FileManager.default.contentsOfDirectory(atPath: path).filter { !$0.hasPrefix(".") }.sorted()
            files = names.map { (path as NSString).appendingPathComponent($0) }
        }
        var found: [Int64: AuditCheckpoint] = [:]
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            for checkpoint in try checkpoints(in: data, source: "the witness file '\(file)'") {
                if let other = found[checkpoint.seq], other != checkpoint {
                    throw AuditEvidenceError("the witness holds two different checkpoints \(checkpoint.seq) ('\(file)')")
                }
                found[checkpoint.seq] = checkpoint
            }
        }
        return found.values.sorted { $0.seq < $1.seq }
    }

    /// The checkpoints in `data` (what a witness file holds); `source` names it in errors.
    public static func checkpoints(in data: Data, source: String) throws -> [AuditCheckpoint] {
        var documents: [Any] = []
        if let whole = try? JSONSerialization.jsonObject(with: data) {
            documents = [whole]
        } else {
            for (number, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
                let trimmed = line.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }
                if trimmed.isEmpty { continue }
                guard let document = try? JSONSerialization.jsonObject(with: Data(trimmed)) else {
                    throw AuditEvidenceError("\(source), line \(number + 1), is not JSON")
                }
                documents.append(document)
            }
        }
        var records: [AuditCheckpoint] = []
        func collect(_ value: Any) throws {
            if let array = value as? [Any] {
                for element in array { try collect(element) }
            } else if let object = value as? [String: Any] {
                if object["merkle_root"] != nil, object["signature"] != nil, object["seq"] != nil {
                    let bytes = try JSONSerialization.data(withJSONObject: object)
                    guard let record = try? JSONDecoder().decode(AuditCheckpointRecord.self, from: bytes), let checkpoint = record.checkpoint else {
                        throw AuditEvidenceError("\(source) holds a malformed checkpoint")
                    }
                    records.append(checkpoint)
                } else {
                    for key in object.keys.sorted() { try collect(object[key] as Any) }
                }
            }
        }
        for document in documents { try collect(document) }
        return records
    }

    /// Adds `checkpoint` to the witness at `path`: a file `checkpoint-<seq>.json` when `path` is a
    /// directory, else one JSON line appended to the file (created when missing).
    public static func append(_ checkpoint: AuditCheckpoint, to path: String) throws {
        let line = try AuditCheckpointRecord(checkpoint).jsonLine() + "\n"
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            let name = String(format: "checkpoint-%012lld.json", checkpoint.seq)
            let url = URL(fileURLWithPath: path).appendingPathComponent(name)
            try Data(line.utf8).write(to: url, options: .atomic)
            return
        }
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw AuditEvidenceError("the witness file '\(path)' cannot be created")
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw AuditEvidenceError("the witness file '\(path)' cannot be opened for writing")
        }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line.utf8))
        try handle.synchronize()
    }

    /// What a witness finds wrong with `checkpoints` (as the database or a receipt holds them):
    /// each witnessed checkpoint must be there, identical. Checkpoints the witness holds that no
    /// given key signed prove nothing and are named too.
    ///
    /// - Parameter complete: whether `checkpoints` is the whole list (the database's), so that a
    ///   witnessed checkpoint missing from it was removed; a receipt carries only a few.
    public static func problems(
        _ checkpoints: [AuditCheckpoint],
        witnessed: [AuditCheckpoint],
        keys: [AuditPublicKey],
        complete: Bool
    ) -> [String] {
        var problems: [String] = []
        let held = Dictionary(checkpoints.map { ($0.seq, $0) }, uniquingKeysWith: { first, _ in first })
        for witness in witnessed where complete || held[witness.seq] != nil {
            guard witness.isSigned(byOneOf: keys) else {
                problems.append("the witness's checkpoint \(witness.seq) is not signed by a key given: it proves nothing")
                continue
            }
            if let checkpoint = held[witness.seq] {
                if checkpoint.hash != witness.hash {
                    problems.append(
                        "checkpoint \(witness.seq) is not the one the witness holds (signed \(witness.createdAt.formatted(.iso8601))): "
                            + "the history was rewritten and signed again"
                    )
                }
            } else if complete {
                problems.append(
                    "checkpoint \(witness.seq), which the witness holds (signed \(witness.createdAt.formatted(.iso8601)), "
                        + "\(witness.rowCount) rows), is missing: checkpoints were removed, and the rows they covered with them"
                )
            }
        }
        return problems
    }
}
