import Crypto
import Foundation

/// Evidence for one revocation request that anyone can check offline with the public key:
/// every audit row of the request's chain, each with its Merkle path to a signed checkpoint,
/// and a summary (what was requested, by whom, when, each call to Apple, the outcome) that the
/// verifier derives from those rows again, so the summary cannot say more than the rows.
///
/// The file is canonical JSON (sorted keys, fixed layout) signed as a whole: changing any
/// byte makes it fail to verify.
public struct AuditReceipt: Codable, Sendable, Hashable, SignedEvidenceFile {
    public static let currentFormat = "revoker.audit.receipt.v1"

    public var format: String
    public var issuedAt: String
    public var summary: Summary
    public var events: [Event]
    public var checkpoints: [Checkpoint]
    public var keyID: String
    /// Ed25519 over the canonical JSON of this receipt with an empty signature, base64.
    public var signature: String

    enum CodingKeys: String, CodingKey {
        case format
        case issuedAt = "issued_at"
        case summary, events, checkpoints
        case keyID = "key_id"
        case signature
    }

    /// What happened, as the events say.
    public struct Summary: Codable, Sendable, Hashable {
        public var requestID: String
        public var clientID: String?
        public var externalReference: String?
        public var userID: String?
        public var requestedAt: String?
        public var requestedBy: String?
        public var appleCalls: [AppleCall]
        public var outcome: String?
        public var finishedAt: String?

        enum CodingKeys: String, CodingKey {
            case requestID = "request_id"
            case clientID = "client_id"
            case externalReference = "external_reference"
            case userID = "apple_user_id"
            case requestedAt = "requested_at"
            case requestedBy = "requested_by"
            case appleCalls = "apple_calls"
            case outcome
            case finishedAt = "finished_at"
        }
    }

    public struct AppleCall: Codable, Sendable, Hashable {
        public var at: String
        public var endpoint: String
        public var httpStatus: Int?
        public var providerError: String?
        public var latencyMilliseconds: Int?

        enum CodingKeys: String, CodingKey {
            case at, endpoint
            case httpStatus = "http_status"
            case providerError = "apple_error"
            case latencyMilliseconds = "latency_ms"
        }
    }

    /// One audit row, its place in the chain and its proof.
    public struct Event: Codable, Sendable, Hashable {
        public var row: AuditChainRow
        public var previousHash: String
        public var hash: String
        /// The checkpoint that covers it, its index among that checkpoint's rows, and the path.
        public var checkpoint: Int64
        public var leafIndex: Int
        public var path: [String]

        enum CodingKeys: String, CodingKey {
            case row
            case previousHash = "previous_hash"
            case hash, checkpoint
            case leafIndex = "leaf_index"
            case path
        }

        public init(row: AuditChainRow, previousHash: String, hash: String, checkpoint: Int64, leafIndex: Int, path: [String]) {
            self.row = row
            self.previousHash = previousHash
            self.hash = hash
            self.checkpoint = checkpoint
            self.leafIndex = leafIndex
            self.path = path
        }
    }

    /// A signed checkpoint as the receipt carries it.
    public typealias Checkpoint = AuditCheckpointRecord
}

extension AuditReceipt {
    /// Builds and signs a receipt. `events` are the request's whole chain in order, each with its
    /// stored hashes and its place under one of `checkpoints`.
    public static func issue(
        events: [Event],
        checkpoints: [AuditCheckpoint],
        issuedAtMicros: Int64,
        key: AuditSigningKey
    ) throws -> AuditReceipt {
        guard let first = events.first else { throw AuditEvidenceError("a receipt needs at least one audit event") }
        var receipt = AuditReceipt(
            format: currentFormat,
            issuedAt: WireFormat.timestamp(micros: issuedAtMicros),
            summary: summarize(events.map(\.row), requestID: first.row.chainKey),
            events: events,
            checkpoints: checkpoints.map(Checkpoint.init),
            keyID: key.publicKey.keyID,
            signature: ""
        )
        try receipt.sign(with: key)
        return receipt
    }

    /// The events that end a request.
    public static let finalEvents: Set<String> = ["succeeded", "failed", "cancelled"]

    /// The outcome a final event states: `cancelled`, or the `outcome=` of its detail (nil
    /// when it states none).
    public static func outcome(event: String, detail: String?) -> String? {
        if event == "cancelled" { return "cancelled" }
        return detail.flatMap { $0.hasPrefix("outcome=") ? String($0.dropFirst("outcome=".count)) : nil }
    }

    /// The summary the rows support: requested by the first (`enqueued`) row, each Apple call,
    /// the final outcome.
    public static func summarize(_ rows: [AuditChainRow], requestID: String) -> Summary {
        let enqueued = rows.first { $0.event == "enqueued" }
        let final = rows.last { finalEvents.contains($0.event) }
        let outcome = final.flatMap { Self.outcome(event: $0.event, detail: $0.detail) }
        return Summary(
            requestID: requestID,
            clientID: rows.first?.clientID,
            externalReference: rows.first?.externalReference,
            userID: rows.last { $0.userID != nil }?.userID,
            requestedAt: enqueued.map { WireFormat.timestamp(micros: $0.occurredAtMicros) },
            requestedBy: enqueued?.actor,
            appleCalls: rows.compactMap { row in
                row.providerEndpoint.map {
                    AppleCall(
                        at: WireFormat.timestamp(micros: row.occurredAtMicros),
                        endpoint: $0,
                        httpStatus: row.httpStatus,
                        providerError: row.providerError,
                        latencyMilliseconds: row.latencyMilliseconds
                    )
                }
            },
            outcome: outcome,
            finishedAt: final.map { WireFormat.timestamp(micros: $0.occurredAtMicros) }
        )
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

}

extension AuditReceipt {
    /// What checking a receipt found: nothing when it holds.
    public struct Verification: Sendable {
        public var problems: [String]
        public var receipt: AuditReceipt?
        public var valid: Bool { problems.isEmpty }
    }

    /// Checks a receipt file against `keys`: its bytes are canonical and signed, every event
    /// follows the one before from the chain's start and gives its own hash, every hash is in
    /// its checkpoint's tree, every checkpoint is signed, and the summary is the events'. Each
    /// of its checkpoints that `witnessed` (checkpoints kept outside the database) also holds
    /// must be identical to the witness's.
    public static func verify(_ bytes: Data, keys: [AuditPublicKey], witnessed: [AuditCheckpoint] = []) -> Verification {
        let receipt: AuditReceipt
        do {
            receipt = try JSONDecoder().decode(AuditReceipt.self, from: bytes)
        } catch {
            return Verification(problems: ["the file is not a receipt (not the JSON a receipt has)"])
        }
        var problems = receipt.envelopeProblems(bytes, format: currentFormat, keys: keys)
        var checkpoints: [Int64: AuditCheckpoint] = [:]
        for carried in receipt.checkpoints {
            guard let checkpoint = carried.checkpoint else {
                problems.append("checkpoint \(carried.seq) is malformed")
                continue
            }
            if !checkpoint.isSigned(byOneOf: keys) { problems.append("checkpoint \(carried.seq) is not signed by a key given") }
            checkpoints[checkpoint.seq] = checkpoint
        }
        var previous = AuditChainRow.genesis
        for (index, event) in receipt.events.enumerated() {
            let row = event.row
            let label = "event \(index + 1) (row \(row.id))"
            if row.chainSeq != Int64(index + 1) { problems.append("\(label) is #\(row.chainSeq) of its chain, not #\(index + 1): rows are missing") }
            if row.chainKey != receipt.summary.requestID { problems.append("\(label) belongs to another chain") }
            guard let stated = [UInt8](hex: event.hash), let statedPrevious = [UInt8](hex: event.previousHash) else {
                problems.append("\(label) has a malformed hash")
                continue
            }
            if statedPrevious != previous { problems.append("\(label) does not follow the event before it") }
            if row.hash(after: statedPrevious) != stated { problems.append("\(label): its fields do not give its hash") }
            previous = stated
            guard let checkpoint = checkpoints[event.checkpoint] else {
                problems.append("\(label) names checkpoint \(event.checkpoint), which the receipt does not carry")
                continue
            }
            if !checkpoint.covers(row.txid) {
                problems.append("\(label) lies outside checkpoint \(checkpoint.seq)")
            }
            let path = event.path.compactMap { [UInt8](hex: $0) }
            if path.count != event.path.count
                || !MerkleTree.verify(leaf: stated, index: event.leafIndex, size: Int(checkpoint.rowCount), path: path, root: checkpoint.merkleRoot)
            {
                problems.append("\(label) is not in checkpoint \(checkpoint.seq)'s signed tree")
            }
        }
        if receipt.events.isEmpty { problems.append("the receipt holds no events") }
        problems += AuditWitness.problems(Array(checkpoints.values), witnessed: witnessed, keys: keys, complete: false)
        if summarize(receipt.events.map(\.row), requestID: receipt.summary.requestID) != receipt.summary {
            problems.append("the summary is not what the events say")
        }
        return Verification(problems: problems, receipt: receipt)
    }
}
