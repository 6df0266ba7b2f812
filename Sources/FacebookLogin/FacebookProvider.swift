import Foundation
import JWTKit
import RevokerProvider

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

    public var clientID: String { app.appID }
    public var tokenEndpoint: String { FacebookEndpoint.debugToken.rawValue }
    public var revokeEndpoint: String { FacebookEndpoint.permissions.rawValue }

    /// Facebook Login's grants come as a user access token or a Limited Login token, never as a
    /// code for Revoker to exchange.
    public func exchange(code _: String, redirectURI _: String?) async throws -> GrantProof {
        throw ProviderFailure(
            endpoint: tokenEndpoint,
            classification: .requestRejected,
            httpStatus: nil,
            error: "unsupported_credential",
            detail: "a Facebook Login grant is given as the person's access token, not as a code"
        )
    }

    /// The user access token is this app's and live: `debug_token` names its person.
    public func prove(refreshToken token: String) async throws -> GrantProof {
        GrantProof(identity: .verified(subject: try await person(of: token, live: true)))
    }

    /// Ends the login of the person whose token it is: `debug_token` names them (an expired token
    /// still does), then the app's own token removes the app's login for them.
    public func revoke(token: String, kind _: GrantTokenKind) async throws {
        try await client.removeLogin(userID: try await person(of: token, live: false), app: app)
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
    /// issued, or (when `live`) one no longer valid, is refused for good as already invalid, and
    /// so is one whose person already removed the app (subcode 458) either way; another app's
    /// token is refused as not this app's.
    func person(of token: String, live: Bool) async throws -> String {
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
        if live, !info.isValid { throw rejected("the token is no longer valid") }
        return userID
    }

    private func rejected(_ detail: String) -> ProviderFailure {
        ProviderFailure(endpoint: tokenEndpoint, classification: .credentialRejected, httpStatus: 200, error: "invalid_token", detail: detail)
    }
}
