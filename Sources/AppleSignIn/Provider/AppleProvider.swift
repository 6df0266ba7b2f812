import Foundation
import Logging
import RevokerProvider

/// One app as the worker serves it: its Apple identifiers and key, and its default `redirect_uri`.
public struct AppleAppSettings: Sendable {
    /// The app's identifiers and key.
    public var apple: AppleApp
    /// The `redirect_uri` sent with a code that was enqueued without one.
    public var defaultRedirectURI: String?

    public init(apple: AppleApp, defaultRedirectURI: String? = nil) {
        self.apple = apple
        self.defaultRedirectURI = defaultRedirectURI
    }
}

/// Sign in with Apple behind the provider seam: a client-secret signer per app over one shared
/// connection pool, and one identity-token verifier (Apple's keys are the same for all apps).
public struct AppleProvider: SignInProvider {
    public var name: ProviderName { .apple }
    /// The apps, by client_id.
    public let apps: [String: AppleProviderApp]
    /// Verifies identity tokens from `/auth/token`.
    public let verifier: AppleIdentityTokenVerifier

    /// Prepares a signer per app; each secret lives `clientSecretLifetime`. Identity tokens are
    /// verified with `keys` (Apple's keys from `client` when nil).
    public init(
        apps: some Sequence<AppleAppSettings>,
        clientSecretLifetime: Duration,
        client: AppleClient,
        keys: AppleKeySet? = nil
    ) async throws {
        let verifier = AppleIdentityTokenVerifier(keys: keys ?? AppleKeySet(client: client))
        var entries: [String: AppleProviderApp] = [:]
        for app in apps {
            let signer = try await ClientSecretSigner(app: app.apple, lifetime: clientSecretLifetime)
            entries[app.apple.clientID] = AppleProviderApp(
                client: AppleAppClient(client: client, signer: signer),
                defaultRedirectURI: app.defaultRedirectURI,
                verifier: verifier
            )
        }
        self.apps = entries
        self.verifier = verifier
    }

    public func app(clientID: String) -> (any ProviderApp)? { apps[clientID] }

    public func verifyIdentityToken(_ token: String, clientID: String) async throws -> String {
        guard apps[clientID] != nil else {
            throw IdentityTokenRejected(code: "unknown_client_id", reason: "No Apple app with this client_id is configured.")
        }
        do {
            return try await verifier.verify(token, clientID: clientID, from: .outside).userID
        } catch let error as AppleSignInError {
            throw IdentityTokenRejected(code: error.code.description, reason: error.message)
        }
    }
}

/// One Apple app's calls as the worker makes them: every attempt at a request signs a fresh
/// client secret, shared by that attempt's token call and revoke.
public struct AppleProviderApp: ProviderApp {
    /// Signs and sends this app's calls.
    public let client: AppleAppClient
    /// Sent with codes that were enqueued without a `redirect_uri`.
    public let defaultRedirectURI: String?
    let verifier: AppleIdentityTokenVerifier

    public var clientID: String { client.clientID }
    public var tokenEndpoint: String { AppleEndpoint.token.rawValue }
    public var revokeEndpoint: String { AppleEndpoint.revoke.rawValue }

    public func forAttempt() -> any ProviderApp {
        AppleProviderApp(client: client.forOneAttempt(), defaultRedirectURI: defaultRedirectURI, verifier: verifier)
    }

    public func exchange(code: String, redirectURI: String?) async throws -> GrantProof {
        let response = try await client.exchange(code: code, redirectURI: redirectURI ?? defaultRedirectURI)
        return GrantProof(
            refreshToken: response.refreshToken,
            accessToken: response.accessToken,
            identity: await identity(response.idToken)
        )
    }

    public func prove(refreshToken: String) async throws -> GrantProof {
        let response = try await client.validate(refreshToken: refreshToken)
        return GrantProof(identity: await identity(response.idToken))
    }

    public func revoke(token: String, kind: GrantTokenKind) async throws {
        try await client.revoke(token: token, hint: kind == .accessToken ? .accessToken : .refreshToken)
    }

    /// A revoke of a random token: Apple answers 200 for an unknown token once it accepts the
    /// client secret, and `invalid_client` while it does not.
    public func probe() async throws {
        try await revoke(token: "revoker-probe-\(UUID().uuidString)", kind: .accessToken)
    }

    /// Verifies the identity token of Apple's answer. It never throws: the tokens beside it are
    /// live, and a key Apple's key set does not list yet (or keys that cannot be fetched) leaves
    /// the check for later, not the grant behind.
    func identity(_ idToken: String?) async -> IdentityCheck {
        guard let idToken else { return .absent }
        do {
            return .verified(subject: try await verifier.verify(idToken, clientID: clientID, from: .providerAnswer).userID)
        } catch let failure as ProviderFailure {
            return .unavailable(failure)
        } catch let error as AppleSignInError where error.code == .unknownSigningKey {
            return .unavailable(
                ProviderFailure(
                    endpoint: AppleEndpoint.keys.rawValue,
                    classification: .transient,
                    httpStatus: nil,
                    error: error.code.description,
                    detail: "Apple's identity token names a key /auth/keys does not list yet"
                )
            )
        } catch {
            return .unverifiable(code: (error as? AppleSignInError)?.code.description ?? "id_token_invalid")
        }
    }
}
