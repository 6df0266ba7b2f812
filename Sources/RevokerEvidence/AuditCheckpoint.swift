import Crypto
import Foundation

/// A signed statement that the audit rows of transactions in [txidFrom, txidTo) are exactly
/// `rowCount` rows with the Merkle root `merkleRoot` (over their hashes, in id order), and
/// that it follows the checkpoint whose hash is `previousHash`.
public struct AuditCheckpoint: Sendable, Hashable, Codable {
    public var seq: Int64
    /// Microseconds since 1970, as signed.
    public var createdAtMicros: Int64
    public var txidFrom: UInt64
    public var txidTo: UInt64
    public var rowCount: Int64
    public var merkleRoot: [UInt8]
    public var previousHash: [UInt8]
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
        self.keyID = keyID
        self.signature = signature
    }

    /// What the first checkpoint follows.
    public static let genesis = [UInt8](repeating: 0, count: 32)

    /// The bytes signed and hashed.
    public var message: [UInt8] {
        var encoder = CanonicalEncoder(domain: "revoker.audit.checkpoint.v1")
        encoder.append(String(seq))
        encoder.append(String(createdAtMicros))
        encoder.append(String(txidFrom))
        encoder.append(String(txidTo))
        encoder.append(String(rowCount))
        encoder.append(merkleRoot.hex)
        encoder.append(previousHash.hex)
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
