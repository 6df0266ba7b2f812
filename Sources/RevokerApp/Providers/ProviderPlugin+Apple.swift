import AppleSignIn
import Logging
import RevokerProvider
import RevokerWorker

extension ProviderPlugin {
    /// Sign in with Apple: the apps under `apps`, and Apple's server-to-server notifications,
    /// which share the provider's cache of Apple's keys.
    static let apple = ProviderPlugin(
        make: { configuration, clients, logger in
            let client = client(configuration, clients, logger)
            let keys = AppleKeySet(client: client)
            let provider: AppleProvider
            do {
                provider = try await AppleProvider(
                    apps: configuration.apps.values,
                    clientSecretLifetime: configuration.worker.clientSecretLifetime,
                    client: client,
                    keys: keys
                )
            } catch let error as AppleSignInError {
                throw RevokerAppError(.configuration, error.message)
            }
            var verifier: AppleNotificationVerifier?
            if var settings = configuration.appleNotifications {
                settings.clientIDs = Set(configuration.apps.keys)
                verifier = AppleNotificationVerifier(keys: keys, settings: settings)
            }
            return Parts(provider: provider, inboxes: [AppleNotificationInbox(verifier: verifier)])
        },
        closedInboxes: [AppleNotificationInbox(verifier: nil)],
        check: { configuration, clients, logger in
            await AppleConfigurationCheck.run(
                apps: configuration.apps,
                baseURL: configuration.appleBaseURL,
                clientSecretLifetime: configuration.worker.clientSecretLifetime,
                online: clients.map { client(configuration, $0, logger) }
            )
        }
    )

    static func client(_ configuration: RevokerConfiguration, _ clients: ProviderHTTPClients, _ logger: Logger) -> AppleClient {
        AppleClient(
            clients: clients,
            configuration: .init(baseURL: configuration.appleBaseURL, timeout: configuration.worker.providerTimeout),
            logger: logger
        )
    }
}
