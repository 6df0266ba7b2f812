import Logging
import RevokerProvider

/// Sign in with Apple as the assembly registers it: the apps under `apps`, and Apple's
/// server-to-server notifications, which share the provider's cache of Apple's keys.
public enum ApplePlugin: ProviderPlugin {
    public static let name = ProviderName.apple
    public static var fileKeys: [String: SettingShape] { AppleSettings.fileKeys }
    public static var variables: [SettingVariable] { AppleSettings.variables }
    public static var howToAddApps: String {
        typealias V = AppleSettings.Variable
        return "set \(V.clientID), \(V.teamID), \(V.keyID) and \(V.privateKeyFile), or list Apple apps under \"apps\""
    }

    public static func settings(from source: SettingsSource, secretFiles: inout SecretFiles) throws -> AppleSettings {
        try AppleSettings(from: source, secretFiles: &secretFiles)
    }

    public static func make(_ settings: AppleSettings, clients: ProviderHTTPClients, context: ProviderContext) async throws -> ProviderParts {
        let client = client(settings, clients, context)
        let keys = AppleKeySet(client: client)
        let provider: AppleProvider
        do {
            provider = try await AppleProvider(
                apps: settings.apps.values,
                clientSecretLifetime: context.clientSecretLifetime,
                client: client,
                keys: keys
            )
        } catch let error as AppleSignInError {
            throw ConfigurationError(error.message)
        }
        let verifier = settings.notifications.map { AppleNotificationVerifier(keys: keys, settings: $0) }
        return ProviderParts(provider: provider, inboxes: [AppleNotificationInbox(verifier: verifier)])
    }

    public static var closedInboxes: [any ProviderInbox] { [AppleNotificationInbox(verifier: nil)] }

    public static func check(_ settings: AppleSettings, online clients: ProviderHTTPClients?, context: ProviderContext) async -> ProviderCheckReport {
        await AppleConfigurationCheck.run(
            apps: settings.apps,
            baseURL: settings.baseURL,
            clientSecretLifetime: context.clientSecretLifetime,
            online: clients.map { client(settings, $0, context) }
        )
    }

    static func client(_ settings: AppleSettings, _ clients: ProviderHTTPClients, _ context: ProviderContext) -> AppleClient {
        AppleClient(clients: clients, configuration: .init(baseURL: settings.baseURL, timeout: context.timeout), logger: context.logger)
    }
}
