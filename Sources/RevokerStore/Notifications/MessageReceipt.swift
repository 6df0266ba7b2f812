/// What storing a provider's message did.
public enum MessageReceipt: Sendable, Equatable {
    /// Stored now; `endedRequests` live requests for the user ended `revoked_by_user`.
    case accepted(endedRequests: Int)
    /// Stored before (same `jti`): nothing changed.
    case duplicate
}

/// Whether the provider told Revoker that a claimed request's user revoked the app's grants.
public enum UserRevocation: String, Sendable, Equatable {
    /// Apple's `consent-revoked`: grants issued before it are dead; the user may have signed in again since.
    case consentRevoked = "consent-revoked"
    /// Apple's `account-delete`: the Apple account is gone, and every grant with it.
    case accountDeleted = "account-delete"
}
