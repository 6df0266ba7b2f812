/// What storing a provider's message did.
public enum MessageReceipt: Sendable, Equatable {
    /// Stored now; `endedRequests` live requests for the user ended `revoked_by_user`.
    case accepted(endedRequests: Int)
    /// Stored before (same provider and message id): nothing changed.
    case duplicate
}

/// Whether the provider told Revoker that a claimed request's user revoked the app's grants.
public enum UserRevocation: Sendable, Equatable {
    /// The user's grants for the app are gone (Apple's `consent-revoked`, Google's
    /// `tokens-revoked`): grants issued before it are dead; the user may have signed in again since.
    case consentRevoked
    /// The user's account is gone, and every grant with it (Apple's `account-delete`, Google's
    /// `account-purged`).
    case accountDeleted
}
