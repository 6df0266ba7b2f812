import AppleSignIn
import Logging

/// The configured apps, ready to talk to Apple: a client-secret signer each over one shared
/// connection pool, and one identity-token verifier (Apple's keys are the same for all apps).
public struct AppleApps: Sendable {
    /// One app as the pipeline uses it.
    public struct Entry: Sendable {
        /// Signs and sends this app's calls.
        public let client: AppleAppClient
        /// Sent with codes that were enqueued without a `redirect_uri`.
        public let defaultRedirectURI: String?
    }

    /// The apps, by client_id.
    public let entries: [String: Entry]
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
        var entries: [String: Entry] = [:]
        for app in apps {
            let signer = try await ClientSecretSigner(app: app.apple, lifetime: clientSecretLifetime)
            entries[app.apple.clientID] = Entry(client: AppleAppClient(client: client, signer: signer), defaultRedirectURI: app.defaultRedirectURI)
        }
        self.entries = entries
        self.verifier = AppleIdentityTokenVerifier(keys: keys ?? AppleKeySet(client: client))
    }

    public subscript(clientID: String) -> Entry? { entries[clientID] }
}
