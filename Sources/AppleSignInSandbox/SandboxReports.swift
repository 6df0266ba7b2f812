import Foundation

/// What happened to one grant (a user's authorization of an app), for tests to assert on.
public struct SandboxGrantReport: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey {
        case id
        case clientID = "client_id"
        case subject
        case codeExchanges = "code_exchanges"
        case rejectedCodeExchanges = "rejected_code_exchanges"
        case validations
        case rejectedValidations = "rejected_validations"
        case revoked, revocations
        case revokeCalls = "revoke_calls"
        case revokedByUser = "revoked_by_user"
        case calls
    }

    public var id: String
    public var clientID: String
    public var subject: String
    /// Successful exchanges of the grant's code (Apple allows one).
    public var codeExchanges: Int
    /// Exchanges of the code that Apple refused (reused, expired, wrong client or redirect).
    public var rejectedCodeExchanges: Int
    /// Successful refresh-token validations.
    public var validations: Int
    /// Validations refused because the grant was revoked or the token belongs to another app.
    public var rejectedValidations: Int
    /// Whether the grant has been revoked.
    public var revoked: Bool
    /// Revoke calls that found the grant live and revoked it (at most one).
    public var revocations: Int
    /// All accepted revoke calls naming one of the grant's tokens, live or not.
    public var revokeCalls: Int
    /// Whether the user ended the grant at Apple (a `consent-revoked` or `account-delete` sent).
    public var revokedByUser = false
    /// Every `/auth/*` call attributed to the grant, in arrival order.
    public var calls: [SandboxCall]
}

/// One `/auth/*` call as the sandbox saw it.
public struct SandboxCall: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey { case endpoint, status, at, error }
    /// `/auth/token` or `/auth/revoke`.
    public var endpoint: String
    /// The status answered (0 when the call was hung or dropped).
    public var status: Int
    /// Arrival, in seconds since 1970.
    public var at: Double
    /// Apple's `error` code when one was answered.
    public var error: String?
}

/// Counters over every `/auth/*` call.
public struct SandboxStatistics: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey {
        case calls
        case byOutcome = "by_outcome"
        case lastRejection = "last_rejection"
    }
    /// All `/auth/*` calls.
    public var calls: Int
    /// Counts keyed `"<endpoint> <status> <error>"`.
    public var byOutcome: [String: Int]
    /// Why the last `invalid_client` or `invalid_request` was answered (the sandbox explains what Apple does not).
    public var lastRejection: String?
}
