import RevokerProvider

/// Facebook Login as the assembly registers it: the apps under `facebook.apps`, and their
/// Deauthorize and Data Deletion Request callbacks (received only when a Facebook app is configured).
public enum FacebookPlugin: ProviderPlugin {
    public static let name = ProviderName.facebook
    public static var fileKeys: [String: SettingShape] { FacebookSettings.fileKeys }
    public static var variables: [SettingVariable] { FacebookSettings.variables }
    public static var howToAddApps: String {
        "set \(FacebookSettings.Variable.appID) and \(FacebookSettings.Variable.appSecretFile), or list Facebook apps under \"facebook\": {\"apps\"}"
    }

    public static func settings(from source: SettingsSource, secretFiles: inout SecretFiles) throws -> FacebookSettings {
        try FacebookSettings(from: source, secretFiles: &secretFiles)
    }

    public static func make(_ settings: FacebookSettings, clients: ProviderHTTPClients, context: ProviderContext) async throws -> ProviderParts {
        ProviderParts(
            provider: FacebookProvider(apps: settings.apps.values, client: client(settings, clients, context)),
            inboxes: FacebookCallbackInbox.Callback.allCases.map { FacebookCallbackInbox($0, apps: settings.apps) }
        )
    }

    public static var closedInboxes: [any ProviderInbox] { FacebookCallbackInbox.Callback.allCases.map { FacebookCallbackInbox($0, apps: [:]) } }

    public static func check(
        _ settings: FacebookSettings,
        online clients: ProviderHTTPClients?,
        context: ProviderContext
    ) async -> ProviderCheckReport {
        await FacebookConfigurationCheck.run(
            apps: settings.apps,
            client: settings.client,
            online: clients.map { FacebookProvider(apps: settings.apps.values, client: client(settings, $0, context)) }
        )
    }

    /// Facebook's calls take the worker's provider timeout.
    static func client(_ settings: FacebookSettings, _ clients: ProviderHTTPClients, _ context: ProviderContext) -> FacebookClient {
        var configuration = settings.client
        configuration.timeout = context.timeout
        return FacebookClient(clients: clients, configuration: configuration, logger: context.logger)
    }
}
