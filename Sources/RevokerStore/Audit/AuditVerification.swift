import Foundation
import RevokerEvidence

/// What `revoker audit verify` found.
public struct AuditVerification: Sendable, Encodable, Hashable {
    /// Rows read and checked against their chains.
    public var rowsChecked: Int
    /// Chains those rows belong to.
    public var chainsChecked: Int
    /// Checkpoints whose signature, link and slice were checked.
    public var checkpointsChecked: Int
    /// Rows written since the last checkpoint: protected by their chains only, until the next.
    public var rowsNotYetCheckpointed: Int
    /// Rows under checkpoints signed by keys that were not given: nothing proves them.
    public var rowsNotProven: Int = 0
    /// Checkpoints held outside the database that were compared with the database's.
    public var witnessedCheckpoints: Int = 0
    /// When the last checkpoint was taken.
    public var lastCheckpointAt: Date?
    /// The last checkpoint: an auditor keeps it as a witness for the next verification.
    public var lastCheckpoint: AuditCheckpoint?
    /// The rows migration 0006 brought into the chains (their history before it is not proven).
    public var genesis: Genesis?
    /// Everything that does not hold, each naming its rows.
    public var problems: [AuditProblem]

    public var intact: Bool { problems.isEmpty }

    /// Whether every checkpoint could be checked (no key was missing).
    public var verifiable: Bool { !problems.contains { $0.kind == .unknownKey } }

    public struct Genesis: Sendable, Codable, Hashable {
        public var migratedAt: Date
        public var rowsBroughtIn: Int64

        enum CodingKeys: String, CodingKey {
            case migratedAt = "migrated_at"
            case rowsBroughtIn = "rows_brought_in"
        }
    }

    enum CodingKeys: String, CodingKey {
        case intact
        case verifiable
        case rowsChecked = "rows_checked"
        case chainsChecked = "chains_checked"
        case checkpointsChecked = "checkpoints_checked"
        case rowsNotYetCheckpointed = "rows_not_yet_checkpointed"
        case rowsNotProven = "rows_not_proven"
        case witnessedCheckpoints = "witnessed_checkpoints"
        case lastCheckpointAt = "last_checkpoint_at"
        case genesis
        case problems
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(intact, forKey: .intact)
        try container.encode(verifiable, forKey: .verifiable)
        try container.encode(rowsChecked, forKey: .rowsChecked)
        try container.encode(chainsChecked, forKey: .chainsChecked)
        try container.encode(checkpointsChecked, forKey: .checkpointsChecked)
        try container.encode(rowsNotYetCheckpointed, forKey: .rowsNotYetCheckpointed)
        try container.encode(rowsNotProven, forKey: .rowsNotProven)
        try container.encode(witnessedCheckpoints, forKey: .witnessedCheckpoints)
        try container.encodeIfPresent(lastCheckpointAt, forKey: .lastCheckpointAt)
        try container.encodeIfPresent(genesis, forKey: .genesis)
        try container.encode(problems, forKey: .problems)
    }
}

/// One thing that does not hold, with the rows, chain or checkpoint it concerns.
public struct AuditProblem: Sendable, Codable, Hashable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A row's fields no longer give its hash: it was changed after it was written.
        case changed
        /// Rows of a chain are missing: removed.
        case removed
        /// A row does not follow the one before it, or lies beyond its chain's recorded head:
        /// inserted without the trigger, or the chain was rewritten.
        case inserted
        /// A row's id or time runs against its chain's order, or a row claims a time before
        /// checkpoints that do not cover it: back-dated or reordered.
        case reordered
        /// A checkpoint's slice no longer holds the rows it signed for.
        case checkpointMismatch = "checkpoint_mismatch"
        /// A checkpoint's signature, hash or link to the one before it does not hold.
        case checkpointForged = "checkpoint_forged"
        /// A checkpoint signed by a key that was not given: what it covers is not verifiable
        /// (rewritten rows under a relabelled checkpoint look exactly like this); rotate-in its
        /// public key to check it.
        case unknownKey = "unknown_key"
        /// A checkpoint held outside the database (a witness) is missing from it or differs:
        /// the newest checkpoints were removed, or the history rewritten and signed again.
        case witnessMismatch = "witness_mismatch"
    }

    public var kind: Kind
    public var message: String
    /// The rows concerned (ids), when known.
    public var rows: [Int64]
    /// The chain: a request id, `app:<client_id>` or `revoker`.
    public var chain: String?
    /// The checkpoint's sequence number.
    public var checkpoint: Int64?

    public init(_ kind: Kind, _ message: String, rows: [Int64] = [], chain: String? = nil, checkpoint: Int64? = nil) {
        self.kind = kind
        self.message = message
        self.rows = rows
        self.chain = chain
        self.checkpoint = checkpoint
    }
}

extension AuditVerification {
    /// The JSON the CLI prints and the API answers: snake_case keys, ISO 8601 times.
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// For people: the verdict first, then what was checked, then each problem.
    public var text: String {
        var lines: [String] = []
        if intact {
            lines.append("Audit trail: intact")
        } else if problems.allSatisfy({ $0.kind == .unknownKey }) {
            lines.append(
                "Audit trail: NOT VERIFIABLE: \(problems.count) checkpoint(s) signed by keys not given; the \(rowsNotProven) row(s) "
                    + "they cover are not proven and may have been rewritten"
            )
        } else {
            lines.append("Audit trail: TAMPERED (\(problems.count) problem(s))")
        }
        lines.append("  rows checked: \(rowsChecked) in \(chainsChecked) chain(s)")
        let last = lastCheckpointAt.map { ", the last at \($0.formatted(.iso8601))" } ?? ""
        lines.append("  checkpoints checked: \(checkpointsChecked)\(last)")
        lines.append("  rows not yet in a checkpoint: \(rowsNotYetCheckpointed) (protected by their chains until the next)")
        if witnessedCheckpoints > 0 { lines.append("  checkpoints compared with the witness: \(witnessedCheckpoints)") }
        if let genesis {
            lines.append(
                "  genesis: \(genesis.rowsBroughtIn) earlier row(s) chained by migration 0006 at \(genesis.migratedAt.formatted(.iso8601)); "
                    + "their history before then is not proven"
            )
        }
        for problem in problems {
            lines.append("  \(problem.kind.rawValue): \(problem.message)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
