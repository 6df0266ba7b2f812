import RevokerProvider

/// Sign in with Google as the assembly registers it: the apps under `google.apps`, and
/// Cross-Account Protection's security events (received only when a Google app is configured).
public enum GooglePlugin: ProviderPlugin {
    public static let name = ProviderName.google
    public static var fileKeys: [String: SettingShape] { GoogleSettings.fileKeys }
    public static var variables: [SettingVariable] { GoogleSettings.variables }
    public static var howToAddApps: String {
        "set \(GoogleSettings.Variable.clientID) and \(GoogleSettings.Variable.clientSecretFile), or list Google apps under \"google\": {\"apps\"}"
    }

    public static func settings(from source: SettingsSource, secretFiles: inout SecretFiles) throws -> GoogleSettings {
        try GoogleSettings(from: source, secretFiles: &secretFiles)
    }

    public static func make(_ settings: GoogleSettings, clients: ProviderHTTPClients, context: ProviderContext) async throws -> ProviderParts {
        let client = client(settings, clients, context)
        let apps = settings.apps.values
        let verifier = apps.isEmpty ? nil : GoogleSecurityEventVerifier(keys: GoogleKeySet.risc(client: client), apps: apps)
        return ProviderParts(provider: GoogleProvider(apps: apps, client: client), inboxes: [GoogleSecurityEventInbox(verifier: verifier)])
    }

    public static var closedInboxes: [any ProviderInbox] { [GoogleSecurityEventInbox(verifier: nil)] }

    public static func check(_ settings: GoogleSettings, online clients: ProviderHTTPClients?, context: ProviderContext) async -> ProviderCheckReport
    {
        await GoogleConfigurationCheck.run(
            apps: settings.apps,
            client: settings.client,
            online: clients.map { GoogleProvider(apps: settings.apps.values, client: client(settings, $0, context)) }
        )
    }

    /// Google's calls take the worker's provider timeout.
    static func client(_ settings: GoogleSettings, _ clients: ProviderHTTPClients, _ context: ProviderContext) -> GoogleClient {
        var configuration = settings.client
        configuration.timeout = context.timeout
        return GoogleClient(clients: clients, configuration: configuration, logger: context.logger)
    }
}
