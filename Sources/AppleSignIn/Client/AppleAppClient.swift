import Synchronization

/// Apple's token and revoke calls on behalf of one app, each with a freshly signed client
/// secret, or one secret for the calls of one attempt (``forOneAttempt()``).
public struct AppleAppClient: Sendable {
    /// The shared transport.
    public let client: AppleClient
    /// Signs this app's client secrets.
    public let signer: ClientSecretSigner
    /// The secret this copy's calls share, once signed (nil: every call signs its own).
    private let shared: SharedSecret?

    public init(client: AppleClient, signer: ClientSecretSigner) {
        self.client = client
        self.signer = signer
        self.shared = nil
    }

    /// A copy whose calls share one client secret, signed at its first call: the calls of one
    /// attempt at one request, seconds apart, well within the secret's lifetime.
    public func forOneAttempt() -> AppleAppClient {
        AppleAppClient(client: client, signer: signer, shared: SharedSecret())
    }

    private init(client: AppleClient, signer: ClientSecretSigner, shared: SharedSecret?) {
        self.client = client
        self.signer = signer
        self.shared = shared
    }

    private func secret() async throws -> String {
        guard let shared else { return try await signer.sign() }
        if let secret = shared.value.withLock({ $0 }) { return secret }
        let secret = try await signer.sign()
        return shared.value.withLock { stored in
            if let stored { return stored }
            stored = secret
            return secret
        }
    }

    /// The app's client_id.
    public var clientID: String { signer.app.clientID }

    /// Exchanges an authorization code (single use, five minutes) for tokens.
    /// `redirectURI` must be sent only when the code was issued for one.
    public func exchange(code: String, redirectURI: String?) async throws -> AppleTokenResponse {
        let secret = try await secret()
        var form = [
            ("client_id", clientID), ("client_secret", secret),
            ("code", code), ("grant_type", "authorization_code"),
        ]
        if let redirectURI { form.append(("redirect_uri", redirectURI)) }
        return try await client.token(form: form, secrets: [secret, code])
    }

    /// Validates a refresh token; success proves the grant is still live. No new refresh token comes back.
    public func validate(refreshToken: String) async throws -> AppleTokenResponse {
        let secret = try await secret()
        let form = [
            ("client_id", clientID), ("client_secret", secret),
            ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
        ]
        return try await client.token(form: form, secrets: [secret, refreshToken])
    }

    /// Revokes a token. Apple answers 200 for live and already-dead tokens alike.
    public func revoke(token: String, hint: TokenTypeHint) async throws {
        let secret = try await secret()
        let form = [
            ("client_id", clientID), ("client_secret", secret),
            ("token", token), ("token_type_hint", hint.rawValue),
        ]
        try await client.revoke(form: form, secrets: [secret, token])
    }
}

/// One attempt's client secret.
private final class SharedSecret: Sendable {
    let value = Mutex<String?>(nil)
}
