import Logging

/// A sign-in provider as the assembly registers it: its part of the configuration, and how its
/// provider, its inboxes and its `revoker check` findings are made from it. The worker, the API,
/// the store and the webhooks know a provider only through what this makes.
public protocol ProviderPlugin: Sendable {
    associatedtype Settings: ProviderSettings

    /// Its name, as requests name it.
    static var name: ProviderName { get }
    /// Its keys at the top level of the configuration file.
    static var fileKeys: [String: SettingShape] { get }
    /// The environment variables it reads.
    static var variables: [SettingVariable] { get }
    /// How to configure an app, for the message when none is (`set GOOGLE_CLIENT_ID and …`).
    static var howToAddApps: String { get }
    /// Reads its settings (from the top level); each file holding a secret is checked with `secretFiles`.
    static func settings(from source: SettingsSource, secretFiles: inout SecretFiles) throws -> Settings
    /// Makes its provider and inboxes over the shared connection pools.
    static func make(_ settings: Settings, clients: ProviderHTTPClients, context: ProviderContext) async throws -> ProviderParts
    /// Its inboxes when no provider is made (an API with nothing to ask a provider): their routes
    /// are served and receive nothing.
    static var closedInboxes: [any ProviderInbox] { get }
    /// What `revoker check` finds of its apps; with pools, also the provider's verdicts (`check --online`).
    static func check(_ settings: Settings, online clients: ProviderHTTPClients?, context: ProviderContext) async -> ProviderCheckReport
}

/// What the assembly needs to know of a provider's settings.
public protocol ProviderSettings: Sendable {
    /// The client_ids of its apps.
    var clientIDs: Set<String> { get }
    /// Each app's limit of calls per second to the provider, where its entry sets one.
    var requestsPerSecond: [String: Double] { get }
    /// Whether an API needs the provider made even without apps (it receives the provider's messages).
    var receivesMessages: Bool { get }
}

/// What every provider is made with beside its own settings.
public struct ProviderContext: Sendable {
    /// A call's limit (`worker.provider_timeout_seconds`).
    public var timeout: Duration
    /// How long a signed client secret is valid (`worker.client_secret_lifetime_seconds`).
    public var clientSecretLifetime: Duration
    public var logger: Logger

    public init(timeout: Duration, clientSecretLifetime: Duration, logger: Logger) {
        self.timeout = timeout
        self.clientSecretLifetime = clientSecretLifetime
        self.logger = logger
    }
}

/// What one provider brings.
public struct ProviderParts: Sendable {
    /// The provider the worker calls and that verifies identity tokens.
    public var provider: any SignInProvider
    /// Where it pushes signed messages.
    public var inboxes: [any ProviderInbox]

    public init(provider: any SignInProvider, inboxes: [any ProviderInbox]) {
        self.provider = provider
        self.inboxes = inboxes
    }
}
