import Foundation

/// Why a request reached its final state.
public struct RevocationOutcome: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// The provider accepted the revocation of a live token (state `succeeded`).
    public static let revoked = Self("revoked")
    /// The token was already invalid: nothing left to revoke (state `succeeded`).
    public static let alreadyInvalid = Self("already_invalid")
    /// The provider told Revoker that the user revoked the grant (Apple's `consent-revoked`) or
    /// deleted their account (`account-delete`): nothing left to revoke (state `succeeded`).
    public static let revokedByUser = Self("revoked_by_user")
    /// A hold request took its grant into custody: the refresh token is sealed in the grant
    /// (state `succeeded`, purpose ``RequestPurpose/hold`` only).
    public static let held = Self("held")
    /// A validation found a held grant's refresh token live; it stays held (state `succeeded`,
    /// purpose ``RequestPurpose/validate`` only).
    public static let live = Self("live")
    /// The provider rejected the authorization code (expired, used, other client) (state `failed`).
    public static let codeRejected = Self("code_rejected")
    /// A rescued request's code exchange was refused after an earlier attempt had started one:
    /// the earlier attempt may have used the code, so what became of the grant is unknown
    /// (state `failed`).
    public static let exchangeLost = Self("exchange_lost")
    /// The id_token's subject differs from the enqueued user id (state `failed`).
    public static let subjectMismatch = Self("subject_mismatch")
    /// Attempts ran out on transient errors (state `failed`).
    public static let exhausted = Self("exhausted")
    /// Our configuration for the app is wrong; the sealed credential is kept so the request
    /// can be requeued once fixed (state `failed`).
    public static let clientMisconfigured = Self("client_misconfigured")
    /// The provider rejected the request for another reason (state `failed`).
    public static let rejected = Self("rejected")
    /// Cancelled by an operator (state `cancelled`).
    public static let cancelled = Self("cancelled")
    /// All outcomes.
    public static let all: [RevocationOutcome] = [
        .revoked, .alreadyInvalid, .revokedByUser, .held, .live, .codeRejected, .exchangeLost, .subjectMismatch, .exhausted, .clientMisconfigured,
        .rejected,
        .cancelled,
    ]

    /// The final state this outcome belongs to.
    public var state: RevocationState {
        switch self {
        case .revoked, .alreadyInvalid, .revokedByUser, .held, .live: .succeeded
        case .cancelled: .cancelled
        default: .failed
        }
    }
    public var description: String { self.rawValue }
}
