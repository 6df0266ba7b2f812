/// A sign-in provider as the worker uses it: per app, prove a grant live and whose it is, then
/// revoke it. Apple and Google are each a target that implements this and a registration in
/// `RevokerApp`; the worker, the store and the API know providers only by ``ProviderName``.
public protocol SignInProvider: Sendable {
    /// The name requests carry.
    var name: ProviderName { get }
    /// The configured app with this client_id, or nil when this provider has none.
    func app(clientID: String) -> (any ProviderApp)?
    /// Verifies, completely, an identity token that the app `clientID` received when the user
    /// signed in (signature by `kid`, the one allowed `alg`, `iss`, `aud` among the app's client
    /// IDs, times) and returns its `sub`.
    ///
    /// Throws ``IdentityTokenRejected`` naming what did not verify, or a transient
    /// ``ProviderFailure`` when the provider's keys cannot be fetched.
    func verifyIdentityToken(_ token: String, clientID: String) async throws -> String
    /// The credentials a revocation request of this provider may carry, as requests name their
    /// kind (`authorization_code`, `refresh_token`, `access_token`, `identity_token`).
    var credentialKinds: Set<String> { get }
    /// The credentials a grant of this provider is registered with at sign-in.
    var grantKinds: Set<String> { get }
}

extension SignInProvider {
    /// A code exchanged for tokens, a refresh token, and an access token.
    public var credentialKinds: Set<String> { ["authorization_code", "refresh_token", "access_token"] }
    /// A code exchanged for a refresh token, or a refresh token.
    public var grantKinds: Set<String> { ["authorization_code", "refresh_token"] }
}

/// An identity token that did not verify: a bounded `code` and a sentence safe to show (never
/// the token).
public struct IdentityTokenRejected: Error, Sendable, Hashable, CustomStringConvertible {
    /// A short snake_case word, e.g. `wrong_audience`, `expired_identity_token`.
    public let code: String
    /// What did not verify.
    public let reason: String

    public init(code: String, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { reason }
}

/// One configured app of a provider: the calls the worker makes on its behalf.
///
/// Every call throws ``ProviderFailure`` for the provider's refusals and for transport
/// failures; anything else it throws is treated as a transient failure.
public protocol ProviderApp: Sendable {
    /// The app's client_id as requests name it.
    var clientID: String { get }
    /// The token endpoint as the audit trail and metrics name it (a path such as `/auth/token`).
    var tokenEndpoint: String { get }
    /// The revoke endpoint as the audit trail and metrics name it.
    var revokeEndpoint: String { get }
    /// The endpoint a token of `kind` is revoked at; ``revokeEndpoint`` unless the provider ends
    /// some grants elsewhere.
    func revokeEndpoint(for kind: GrantTokenKind) -> String
    /// Exchanges an authorization code (single use) for tokens and checks the identity token
    /// that comes with them. `redirectURI` is the one the code was issued for, when known.
    func exchange(code: String, redirectURI: String?) async throws -> GrantProof
    /// Proves a refresh token live and says whose it is, without revoking it.
    func prove(refreshToken: String) async throws -> GrantProof
    /// Whether ``prove(accessToken:)`` can say whose an access token is.
    var provesAccessTokens: Bool { get }
    /// Says whose an access token is and that the grant behind it is this app's and live, for a
    /// provider that ends a grant by its user (so an expired access token still names a live
    /// grant). The default refuses.
    func prove(accessToken: String) async throws -> GrantProof
    /// Revokes a token.
    func revoke(token: String, kind: GrantTokenKind) async throws
    /// Checks that the provider accepts the app's own credentials, without touching a grant:
    /// throws a `configurationFault` failure while it does not.
    func probe() async throws
    /// The app for one attempt at one request, whose calls may share work: Apple's signs one
    /// client secret for the attempt's token call and revoke. The default is the app itself.
    func forAttempt() -> any ProviderApp
}

extension ProviderApp {
    public func forAttempt() -> any ProviderApp { self }

    public func revokeEndpoint(for _: GrantTokenKind) -> String { revokeEndpoint }

    public var provesAccessTokens: Bool { false }

    public func prove(accessToken _: String) async throws -> GrantProof {
        throw ProviderFailure.unsupportedCredential(endpoint: tokenEndpoint, detail: "this provider's grants are not held by an access token")
    }
}

/// The kind of token a revoke is given.
public enum GrantTokenKind: String, Sendable, Hashable {
    case refreshToken = "refresh_token"
    case accessToken = "access_token"
    /// An identity token that is itself the grant.
    case identityToken = "identity_token"
}

/// What proving a grant established.
public struct GrantProof: Sendable, CustomStringConvertible {
    /// A refresh token issued for an exchanged code: stored (sealed) before the revoke, so that
    /// a retry never re-sends the spent code.
    public var refreshToken: String?
    /// An access token issued for an exchanged code, revoked when no refresh token came.
    public var accessToken: String?
    /// Whose grant it is.
    public var identity: IdentityCheck

    public init(refreshToken: String? = nil, accessToken: String? = nil, identity: IdentityCheck) {
        self.refreshToken = refreshToken
        self.accessToken = accessToken
        self.identity = identity
    }

    public var description: String {
        "GrantProof(refresh_token: \(refreshToken == nil ? "absent" : "redacted"), access_token: \(accessToken == nil ? "absent" : "redacted"), identity: \(identity))"
    }
}

/// What the identity token that came with a grant said about its user.
public enum IdentityCheck: Sendable, Hashable {
    /// Verified completely (signature by `kid`, `alg`, `iss`, `aud`, times); `subject` is its `sub`.
    case verified(subject: String)
    /// No identity token came back.
    case absent
    /// An identity token came back and did not verify; `code` names why (a bounded word).
    case unverifiable(code: String)
    /// An identity token came back and could not be checked yet: the provider's keys could not be
    /// fetched, or do not list the key yet. The grant is live; whose it is must be asked again.
    case unavailable(ProviderFailure)
}

/// The providers one process serves, by name.
public struct SignInProviders: Sendable {
    /// The providers, by name.
    public let all: [ProviderName: any SignInProvider]

    /// Registers each provider under its name; a later one of the same name replaces an earlier.
    public init(_ providers: [any SignInProvider]) {
        self.all = Dictionary(providers.map { ($0.name, $0) }, uniquingKeysWith: { _, later in later })
    }

    public subscript(name: ProviderName) -> (any SignInProvider)? { all[name] }

    /// The app a request names, or nil when its provider or its client_id is not configured here.
    public func app(provider: ProviderName, clientID: String) -> (any ProviderApp)? {
        all[provider]?.app(clientID: clientID)
    }

    /// The app with this client_id at whichever provider has it (the configuration keeps
    /// client_ids unique across providers, so there is at most one).
    public func app(clientID: String) -> (any ProviderApp)? {
        all.keys.sorted().lazy.compactMap { all[$0]?.app(clientID: clientID) }.first
    }
}
