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
    /// Successful exchanges of the grant's code (one is allowed).
    public var codeExchanges: Int
    /// Exchanges of the code that were refused (reused, expired, wrong client or redirect).
    public var rejectedCodeExchanges: Int
    /// Successful uses of the refresh token (Apple's validation, Google's refresh).
    public var validations: Int
    /// Validations refused because the grant was revoked or the token belongs to another app.
    public var rejectedValidations: Int
    /// Whether the grant has been revoked.
    public var revoked: Bool
    /// Revoke calls that found the grant live and revoked it (at most one).
    public var revocations: Int
    /// All accepted revoke calls naming one of the grant's tokens, live or not.
    public var revokeCalls: Int
    /// Whether the user ended the grant at the provider (a notification of it was sent).
    public var revokedByUser = false
    /// Every call attributed to the grant, in arrival order.
    public var calls: [SandboxCall]

    /// A grant nothing has happened to yet.
    package init(id: String, clientID: String, subject: String) {
        self.id = id
        self.clientID = clientID
        self.subject = subject
        self.codeExchanges = 0
        self.rejectedCodeExchanges = 0
        self.validations = 0
        self.rejectedValidations = 0
        self.revoked = false
        self.revocations = 0
        self.revokeCalls = 0
        self.calls = []
    }
}

/// One call to a provider endpoint as the sandbox saw it.
public struct SandboxCall: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey { case endpoint, status, at, error }
    /// The endpoint, e.g. `/auth/token` or `/revoke`.
    public var endpoint: String
    /// The status answered (0 when the call was hung or dropped).
    public var status: Int
    /// Arrival, in seconds since 1970.
    public var at: Double
    /// The provider's `error` code when one was answered.
    public var error: String?

    package init(endpoint: String, status: Int, at: Double, error: String?) {
        self.endpoint = endpoint
        self.status = status
        self.at = at
        self.error = error
    }
}

/// Counters over every call to a provider endpoint.
public struct SandboxStatistics: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey {
        case calls
        case byOutcome = "by_outcome"
        case lastRejection = "last_rejection"
        case clientSecrets = "client_secrets"
    }
    /// All calls.
    public var calls: Int
    /// Counts keyed `"<endpoint> <status> <error>"`.
    public var byOutcome: [String: Int]
    /// Why the last `invalid_client` or `invalid_request` was answered (the sandbox explains what the provider does not).
    public var lastRejection: String?
    /// Distinct client secrets accepted (Apple's; a worker signs one per attempt at a request).
    public var clientSecrets: Int

    package init() {
        self.calls = 0
        self.byOutcome = [:]
        self.lastRejection = nil
        self.clientSecrets = 0
    }

    /// Counts a call and its answer; `rejection` says why a client was refused.
    package mutating func count(endpoint: String, status: Int, error: String?, rejection: String?) {
        calls += 1
        byOutcome["\(endpoint) \(status) \(error ?? "-")", default: 0] += 1
        if let rejection { lastRejection = rejection }
    }
}
