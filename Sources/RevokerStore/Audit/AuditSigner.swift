import Foundation
import RevokerEvidence
import Synchronization

/// Signs the audit trail's checkpoints, and remembers the last one it signed or saw so that it
/// never extends a history that does not extend it: a database owner who removed checkpoints
/// and rewrote rows under them cannot have the service sign over the result.
///
/// What it remembers lives outside the database: in memory for the process's life, and in the
/// witness (`audit.witness_path`), which it reads at start and appends every checkpoint to.
/// Without a witness, a fresh process trusts the database's newest checkpoint once.
public final class AuditSigner: Sendable {
    /// Signs checkpoints and receipts.
    public let key: AuditSigningKey
    /// The keys whose checkpoints count as history: its own and earlier ones.
    public let trustedKeys: [AuditPublicKey]
    /// Where each checkpoint it signs is written too (a file or a directory), if anywhere.
    public let witnessPath: String?
    private let state: Mutex<State>

    struct State {
        var last: AuditCheckpoint?
        var refusal: Refusal?
    }

    /// Why the signer will not sign, until the history is restored.
    public struct Refusal: Sendable, Hashable, CustomStringConvertible {
        /// `checkpoint_missing`, `checkpoint_rewritten` or `checkpoint_untrusted`.
        public var code: String
        public var message: String
        public var description: String { "\(code): \(message)" }
    }

    /// A signer that remembers the newest checkpoint of `witnessPath` signed by one of
    /// `trustedKeys` (the witness may not exist yet).
    public init(key: AuditSigningKey, trustedKeys: [AuditPublicKey], witnessPath: String? = nil) throws {
        let trusted = trustedKeys.contains { $0.keyID == key.publicKey.keyID } ? trustedKeys : [key.publicKey] + trustedKeys
        self.key = key
        self.trustedKeys = trusted
        self.witnessPath = witnessPath
        var last: AuditCheckpoint?
        if let witnessPath, FileManager.default.fileExists(atPath: witnessPath) {
            last = try AuditWitness.read(witnessPath).last { $0.isSigned(byOneOf: trusted) }
        }
        state = Mutex(State(last: last))
    }

    /// The newest checkpoint this signer signed or accepted as history.
    public var lastKnown: AuditCheckpoint? { state.withLock { $0.last } }

    /// Why it refuses to sign, if it does.
    public var refusal: Refusal? { state.withLock { $0.refusal } }

    /// Checks that `stored` (the database's checkpoints from `known` on, in order) extends
    /// `known`, the last checkpoint this signer knows; returns the checkpoint to link the next one to.
    func history(_ stored: [AuditCheckpoint], newest: AuditCheckpoint?, known: AuditCheckpoint?) throws(RevokerStoreError) -> AuditCheckpoint? {
        guard let known else {
            // Nothing known yet: the database's newest is history if a trusted key signed it.
            if let newest, !newest.isSigned(byOneOf: trustedKeys) {
                throw refuse(
                    "checkpoint_untrusted",
                    "the newest checkpoint (\(newest.seq)) is not signed by a key this service trusts"
                )
            }
            return newest
        }
        guard let first = stored.first, first.seq == known.seq else {
            throw refuse(
                "checkpoint_missing",
                "checkpoint \(known.seq), signed at \(known.createdAt.formatted(.iso8601)), is no longer in the database"
            )
        }
        guard first.hash == known.hash else {
            throw refuse("checkpoint_rewritten", "checkpoint \(known.seq) in the database is not the one signed")
        }
        var previous = first
        for checkpoint in stored.dropFirst() {
            guard checkpoint.seq == previous.seq + 1, checkpoint.previousHash == previous.hash, checkpoint.txidFrom == previous.txidTo,
                checkpoint.isSigned(byOneOf: trustedKeys)
            else {
                throw refuse(
                    "checkpoint_rewritten",
                    "checkpoint \(checkpoint.seq) does not extend checkpoint \(previous.seq) as a trusted key signed it"
                )
            }
            previous = checkpoint
        }
        state.withLock { $0.refusal = nil }
        return previous
    }

    /// Remembers `checkpoint` as the newest history (signed here and stored).
    func remember(_ checkpoint: AuditCheckpoint) {
        state.withLock { state in
            if (state.last?.seq ?? 0) < checkpoint.seq { state.last = checkpoint }
            state.refusal = nil
        }
    }

    private func refuse(_ code: String, _ message: String) -> RevokerStoreError {
        state.withLock { $0.refusal = Refusal(code: code, message: message) }
        return RevokerStoreError(
            .historyRewritten,
            "no checkpoint is signed: \(message); the audit trail may have been rewritten, run `revoker audit verify --witness`"
        )
    }
}
