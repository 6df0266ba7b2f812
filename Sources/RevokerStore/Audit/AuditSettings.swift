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

    public init(signingKey: AuditSigningKey? = nil, previousKeys: [AuditPublicKey] = [], checkpointInterval: Duration = .seconds(60)) {
        self.signingKey = signingKey
        self.previousKeys = previousKeys
        self.checkpointInterval = checkpointInterval
    }

    /// Every key a checkpoint may be signed with.
    public var verificationKeys: [AuditPublicKey] {
        (signingKey.map { [$0.publicKey] } ?? []) + previousKeys
    }
}
