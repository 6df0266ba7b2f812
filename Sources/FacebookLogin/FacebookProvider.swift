import Foundation
import JWTKit
import RevokerProvider
import Synchronization

/// Facebook Login behind the provider seam: the apps over one shared connection pool, and one
/// Limited Login verifier (Facebook's keys are the same for every app).
public struct FacebookProvider: SignInProvider {
    public var name: ProviderName { .facebook }
    /// The apps, by app id.
    public let apps: [String: FacebookProviderApp]
    public let verifier: LimitedLoginVerifier

    public init(apps: some Sequence<FacebookApp>, client: FacebookClient, verifier: LimitedLoginVerifier? = nil) {
        var entries: [String: FacebookProviderApp] = [:]
        for app in apps { entries[app.appID] = FacebookProviderApp(app: app, client: client) }
        self.apps = entries
        self.verifier = verifier ?? LimitedLoginVerifier(client: client)
    }

    public func app(clientID: String) -> (any ProviderApp)? { apps[clientID] }

    /// A person's access token, or a Limited Login token: Facebook issues no code or refresh
    /// token to an app's client.
    public var credentialKinds: Set<String> { ["access_token", "identity_token"] }
    public var grantKinds: Set<String> { credentialKinds }

    /// A Limited Login token, verified completely; returns the app-scoped user id.
    public func verifyIdentityToken(_ token: String, clientID: String) async throws -> String {
        guard apps[clientID] != nil else {
            throw IdentityTokenRejected(code: "unknown_client_id", reason: "No Facebook app with this app id is configured.")
        }
        do {
            return try await verifier.verify(token, appID: clientID).subject.value
        } catch let error as FacebookLoginError {
            throw IdentityTokenRejected(code: error.code.rawValue, reason: error.message)
        }
    }
}

/// One Facebook app's calls as the worker makes them. A grant is the person's login to the app,
/// proven by their user access token (`debug_token`: this app's, live, whose) and ended with the
/// app's own token (`DELETE /{user-id}/permissions`), so that an expired user token still ends it.
public struct FacebookProviderApp: ProviderApp {
    public let app: FacebookApp
    public let client: FacebookClient
    /// Whose tokens one attempt's proof found, so that its revoke asks `debug_token` once.
    let named: NamedPeople?

    public init(app: FacebookApp, client: FacebookClient) {
        self.init(app: app, client: client, named: nil)
    }

    init(app: FacebookApp, client: FacebookClient, named: NamedPeople?) {
        self.app = app
        self.client = client
        self.named = named
    }

    /// The people one attempt's `debug_token` calls named, by token.
    final class NamedPeople: Sendable {
        private let people = Mutex<[String: String]>([:])
        func person(of token: String) -> String? { people.withLock { $0[token] } }
        func remember(_ person: String, of token: String) { people.withLock { $0[token] = person } }
    }

    public func forAttempt() -> any ProviderApp {
        FacebookProviderApp(app: app, client: client, named: NamedPeople())
    }

    public var clientID: String { app.appID }
    public var tokenEndpoint: String { FacebookEndpoint.debugToken.rawValue }
    public var revokeEndpoint: String { FacebookEndpoint.permissions.rawValue }

    /// Facebook Login's grants come as a user access token or a Limited Login token, never as a
    /// code for Revoker to exchange.
    public func exchange(code _: String, redirectURI _: String?) async throws -> GrantProof {
        throw ProviderFailure.unsupportedCredential(
            endpoint: tokenEndpoint,
            detail: "a Facebook Login grant is given as the person's access token, not as a code"
        )
    }

    /// Facebook issues no refresh token to an app's client.
    public func prove(refreshToken _: String) async throws -> GrantProof {
        throw ProviderFailure.unsupportedCredential(
            endpoint: tokenEndpoint,
            detail: "Facebook Login issues no refresh token; give the person's access token"
        )
    }

    public var provesAccessTokens: Bool { true }

    /// The user access token is this app's, and its person has not removed the app: `debug_token`
    /// names them. An expired token still names a live grant (the app's token ends it).
    public func prove(accessToken token: String) async throws -> GrantProof {
        GrantProof(identity: .verified(subject: try await person(of: token)))
    }

    /// Ends the person's grant. An access token: `debug_token` names its person (an expired token
    /// still does), then the app's own token removes the app's login for them. A Limited Login
    /// token: the uninstall endpoint Meta documents for Limited Login.
    public func revoke(token: String, kind: GrantTokenKind) async throws {
        if kind == .identityToken { return try await client.uninstall(identityToken: token, app: app) }
        if let known = named?.person(of: token) { return try await client.removeLogin(userID: known, app: app) }
        try await client.removeLogin(userID: try await person(of: token), app: app)
    }

    public func revokeEndpoint(for kind: GrantTokenKind) -> String {
        kind == .identityToken ? FacebookEndpoint.uninstall.rawValue : revokeEndpoint
    }

    /// `debug_token` of the app's own token: Facebook answers once it accepts the app id and
    /// secret, with Graph's error 190 while it does not.
    public func probe() async throws {
        let info = try await client.debugToken(app.accessToken, app: app)
        guard info.isValid, info.appID == app.appID else {
            throw ProviderFailure(
                endpoint: tokenEndpoint,
                classification: .configurationFault,
                httpStatus: 200,
                detail: "Facebook does not take the app's own token for this app"
            )
        }
    }

    /// The app-scoped id of the person a user access token belongs to. A token Facebook never
    /// issued, or one whose person already removed the app (subcode 458), is refused for good as
    /// already invalid; another app's token is refused as not this app's. An expired token still
    /// names its person.
    func person(of token: String) async throws -> String {
        let info: FacebookTokenInfo
        do {
            info = try await client.debugToken(token, app: app)
        } catch let failure as ProviderFailure where failure.error == "graph_100" {
            // Another app's token: not a grant of this app, as Google's `unauthorized_client` says.
            throw ProviderFailure(
                endpoint: tokenEndpoint,
                classification: .requestRejected,
                httpStatus: failure.httpStatus,
                error: failure.error,
                errorDescription: failure.errorDescription,
                detail: "the token belongs to another app (\(failure.detail))"
            )
        }
        guard let userID = info.userID, info.appID == app.appID, info.type.map({ $0 == "USER" }) ?? true else {
            throw rejected("Facebook does not know the token as a user token of this app")
        }
        if info.failureSubcode == 458 { throw rejected("the person already removed the app") }
        named?.remember(userID, of: token)
        return userID
    }

    private func rejected(_ detail: String) -> ProviderFailure {
        ProviderFailure(endpoint: tokenEndpoint, classification: .credentialRejected, httpStatus: 200, error: "invalid_token", detail: detail)
    }
}
