import GoogleSignIn
import RevokerProvider

extension ProviderPlugin {
    /// Sign in with Google: the apps under `google.apps`, and Cross-Account Protection's security
    /// events (received only when a Google app is configured).
    static let google = ProviderPlugin(
        make: { configuration, clients, logger in
            let client = GoogleClient(clients: clients, configuration: configuration.google, logger: logger)
            let apps = configuration.googleApps.values
            let verifier = apps.isEmpty ? nil : GoogleSecurityEventVerifier(keys: GoogleKeySet.risc(client: client), apps: apps)
            return Parts(provider: GoogleProvider(apps: apps, client: client), inboxes: [GoogleSecurityEventInbox(verifier: verifier)])
        },
        closedInboxes: [GoogleSecurityEventInbox(verifier: nil)],
        check: { configuration, clients, logger in
            await GoogleConfigurationCheck.run(
                apps: configuration.googleApps,
                client: configuration.google,
                online: clients.map {
                    GoogleProvider(
                        apps: configuration.googleApps.values,
                        client: GoogleClient(clients: $0, configuration: configuration.google, logger: logger)
                    )
                }
            )
        }
    )
}
