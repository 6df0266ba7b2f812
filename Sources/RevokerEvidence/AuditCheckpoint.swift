import Crypto
import Foundation

/// A signed statement that the audit rows of the transactions it covers are exactly `rowCount`
/// rows with the Merkle root `merkleRoot` (over their hashes, in id order), and that it follows
/// the checkpoint whose hash is `previousHash`.
///
/// It covers the transactions in [txidFrom, txidTo) that had ended when it was taken, and the
/// `lateTxids` (open at the previous checkpoint, ended since); the `openTxids` (below txidTo,
/// still running) are left to a later one. So a transaction held open never holds back what
/// the others wrote.
public struct AuditCheckpoint: Sendable, Hashable, Codable {
    public var seq: Int64
    /// Microseconds since 1970, as signed.
    public var createdAtMicros: Int64
    public var txidFrom: UInt64
    public var txidTo: UInt64
    public var rowCount: Int64
    public var merkleRoot: [UInt8]
    public var previousHash: [UInt8]
    /// Transactions below `txidTo` still running when it was taken, ascending: not covered.
    public var openTxids: [UInt64]
    /// Transactions below `txidFrom` that the previous checkpoint left open and that have ended
    /// since, ascending: covered by this one.
    public var lateTxids: [UInt64]
    public var keyID: String
    public var signature: [UInt8]

    public init(
        seq: Int64,
        createdAtMicros: Int64,
        txidFrom: UInt64,
        txidTo: UInt64,
        rowCount: Int64,
        merkleRoot: [UInt8],
        previousHash: [UInt8],
        openTxids: [UInt64] = [],
        lateTxids: [UInt64] = [],
        keyID: String = "",
        signature: [UInt8] = []
    ) {
        self.seq = seq
        self.createdAtMicros = createdAtMicros
        self.txidFrom = txidFrom
        self.txidTo = txidTo
        self.rowCount = rowCount
        self.merkleRoot = merkleRoot
        self.previousHash = previousHash
        self.openTxids = openTxids
        self.lateTxids = lateTxids
        self.keyID = keyID
        self.signature = signature
    }

    /// What the first checkpoint follows.
    public static let genesis = [UInt8](repeating: 0, count: 32)

    /// Whether the rows of transaction `txid` are in this checkpoint's slice.
    public func covers(_ txid: UInt64) -> Bool {
        ((txidFrom..<txidTo).contains(txid) || lateTxids.contains(txid)) && !openTxids.contains(txid)
    }

    /// The bytes signed and hashed. A checkpoint that left nothing open and took nothing late
    /// is written as before those lists existed (v1), so earlier checkpoints keep verifying.
    public var message: [UInt8] {
        let lists = !openTxids.isEmpty || !lateTxids.isEmpty
        var encoder = CanonicalEncoder(domain: lists ? "revoker.audit.checkpoint.v2" : "revoker.audit.checkpoint.v1")
        encoder.append(String(seq))
        encoder.append(String(createdAtMicros))
        encoder.append(String(txidFrom))
        encoder.append(String(txidTo))
        encoder.append(String(rowCount))
        encoder.append(merkleRoot.hex)
        encoder.append(previousHash.hex)
        if lists {
            encoder.append(openTxids.map(String.init).joined(separator: ","))
            encoder.append(lateTxids.map(String.init).joined(separator: ","))
        }
        encoder.append(keyID)
        return encoder.bytes
    }

    /// What the next checkpoint names as its previous.
    public var hash: [UInt8] { Array(SHA256.hash(data: message)) }

    /// This checkpoint, named and signed by `key`.
    public func signed(with key: AuditSigningKey) throws -> AuditCheckpoint {
        var checkpoint = self
        checkpoint.keyID = key.publicKey.keyID
        checkpoint.signature = try key.sign(checkpoint.message)
        return checkpoint
    }

    /// Whether one of `keys` (by key id) made the signature.
    public func isSigned(byOneOf keys: [AuditPublicKey]) -> Bool {
        keys.contains { $0.keyID == keyID && $0.isValid(signature: signature, for: message) }
    }

    public var createdAt: Date { Date(timeIntervalSince1970: Double(createdAtMicros) / 1_000_000) }
}
