import Foundation
import RevokerProvider

/// Google Sign-In behind the provider seam: the apps' OAuth clients over one shared connection
/// pool, and one identity-token verifier (Google's keys are the same for every app).
public struct GoogleProvider: SignInProvider {
    public var name: ProviderName { .google }
    /// The apps, by client_id.
    public let apps: [String: GoogleProviderApp]
    public let verifier: GoogleIdentityTokenVerifier

    /// Identity tokens are verified with `keys` (Google's keys from `client` when nil).
    public init(apps: some Sequence<GoogleApp>, client: GoogleClient, keys: GoogleKeySet? = nil) {
        let verifier = GoogleIdentityTokenVerifier(keys: keys ?? GoogleKeySet(client: client))
        var entries: [String: GoogleProviderApp] = [:]
        for app in apps {
            entries[app.clientID] = GoogleProviderApp(app: app, client: client, verifier: verifier)
        }
        self.apps = entries
        self.verifier = verifier
    }

    public func app(clientID: String) -> (any ProviderApp)? { apps[clientID] }

    public func verifyIdentityToken(_ token: String, clientID: String) async throws -> String {
        guard let app = apps[clientID] else {
            throw IdentityTokenRejected(code: "unknown_client_id", reason: "No Google app with this client_id is configured.")
        }
        do {
            return try await verifier.verify(token, audiences: app.app.audiences, from: .outside).googleUserID
        } catch let error as GoogleSignInError {
            throw IdentityTokenRejected(code: error.code.rawValue, reason: error.message)
        }
    }
}

/// One Google app's calls as the worker makes them.
public struct GoogleProviderApp: ProviderApp {
    public let app: GoogleApp
    public let client: GoogleClient
    let verifier: GoogleIdentityTokenVerifier

    public var clientID: String { app.clientID }
    public var tokenEndpoint: String { GoogleEndpoint.token.rawValue }
    public var revokeEndpoint: String { GoogleEndpoint.revoke.rawValue }

    public func exchange(code: String, redirectURI: String?) async throws -> GrantProof {
        var form = [("grant_type", "authorization_code"), ("code", code)] + credentials
        if let redirectURI = redirectURI ?? app.defaultRedirectURI { form.append(("redirect_uri", redirectURI)) }
        let response = try await client.token(form: form, secrets: [code, app.clientSecret.value])
        return GrantProof(
            refreshToken: response.refreshToken,
            accessToken: response.accessToken,
            identity: await identity(response.idToken)
        )
    }

    /// A refresh: Google answers with a new access token (which is left to expire) and, for a
    /// grant with the `openid` scope, an identity token naming the user.
    public func prove(refreshToken: String) async throws -> GrantProof {
        let form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)] + credentials
        let response = try await client.token(form: form, secrets: [refreshToken, app.clientSecret.value])
        return GrantProof(identity: await identity(response.idToken))
    }

    /// Google's revoke takes either kind of token and ends the whole grant.
    public func revoke(token: String, kind _: GrantTokenKind) async throws {
        try await client.revoke(token: token)
    }

    /// A refresh with a random token: Google answers `invalid_grant` once it accepts the
    /// client's id and secret, `invalid_client` while it does not.
    public func probe() async throws {
        do {
            _ = try await prove(refreshToken: "revoker-probe-\(UUID().uuidString)")
        } catch let failure as ProviderFailure where failure.classification == .credentialRejected {
            return
        }
        throw ProviderFailure(
            endpoint: tokenEndpoint,
            classification: .transient,
            httpStatus: 200,
            detail: "Google accepted a refresh token that was made up"
        )
    }

    private var credentials: [(String, String)] { [("client_id", app.clientID), ("client_secret", app.clientSecret.value)] }

    /// Verifies the identity token of Google's answer. It never throws: the tokens beside it are
    /// live, and a key Google's certs do not list yet (or keys that cannot be fetched) leaves the
    /// check for later, not the grant behind.
    func identity(_ idToken: String?) async -> IdentityCheck {
        guard let idToken else { return .absent }
        do {
            return .verified(subject: try await verifier.verify(idToken, audiences: app.audiences, from: .providerAnswer).googleUserID)
        } catch let failure as ProviderFailure {
            return .unavailable(failure)
        } catch let error as GoogleSignInError where error.code == .unknownSigningKey {
            return .unavailable(
                ProviderFailure(
                    endpoint: GoogleEndpoint.certs.rawValue,
                    classification: .transient,
                    httpStatus: nil,
                    error: error.code.rawValue,
                    detail: "Google's identity token names a key its certs do not list yet"
                )
            )
        } catch {
            return .unverifiable(code: (error as? GoogleSignInError)?.code.rawValue ?? "id_token_invalid")
        }
    }
}
