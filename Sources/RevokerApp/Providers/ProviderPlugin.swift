import Logging
import RevokerProvider

/// A provider as the assembly registers it: how its provider and its inboxes are made from the
/// configuration over the shared connection pools. The worker, the API, the store and the
/// webhooks know it only through what this makes.
struct ProviderPlugin: Sendable {
    /// What one provider brings.
    struct Parts: Sendable {
        /// The provider the worker calls and that verifies identity tokens.
        var provider: any SignInProvider
        /// Where it pushes signed messages.
        var inboxes: [any ProviderInbox]
    }

    /// Makes the provider with its configured apps, and its inboxes.
    var make: @Sendable (RevokerConfiguration, ProviderHTTPClients, Logger) async throws -> Parts
    /// Its inboxes when no provider is made (an API with nothing to ask a provider): their
    /// routes are served and receive nothing.
    var closedInboxes: [any ProviderInbox]
    /// What `revoker check` finds of its apps; with pools, also the provider's verdicts
    /// (`check --online`).
    var check: @Sendable (RevokerConfiguration, ProviderHTTPClients?, Logger) async throws -> ProviderCheckReport

    /// Every provider this build serves: one line per provider.
    static let registered: [ProviderPlugin] = [.apple, .google]
}
