import RevokerEvidence

/// How the audit trail is made evidence: the key that signs checkpoints and receipts, the
/// keys that verify them, and how often the worker processes take a checkpoint.
public struct AuditSettings: Sendable {
    /// The signing key; without it no checkpoint or receipt is made, and only chains are checked.
    public var signingKey: AuditSigningKey?
    /// Public keys of earlier signing keys, so that checkpoints they signed still verify.
    public var previousKeys: [AuditPublicKey]
    /// How often a worker or serving process takes a checkpoint.
    public var checkpointInterval: Duration
    /// A file (JSON lines) or directory where every checkpoint signed is written too, outside
    /// the database; a signer reads it at start to know what it signed before.
    public var witnessPath: String?

    public init(signingKey: AuditSigningKey? = nil, previousKeys: [AuditPublicKey] = [], checkpointInterval: Duration = .seconds(60)) {
        self.signingKey = signingKey
        self.previousKeys = previousKeys
        self.checkpointInterval = checkpointInterval
    }

    /// The signer of this configuration, or nil without a signing key. Reads the witness.
    public func signer() throws -> AuditSigner? {
        try signingKey.map { try AuditSigner(key: $0, trustedKeys: verificationKeys, witnessPath: witnessPath) }
    }

    /// Every key a checkpoint may be signed with.
    public var verificationKeys: [AuditPublicKey] {
        (signingKey.map { [$0.publicKey] } ?? []) + previousKeys
    }
}
