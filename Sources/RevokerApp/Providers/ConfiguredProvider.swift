import AppleSignIn
import FacebookLogin
import GoogleSignIn
import RevokerProvider
import RevokerStore

extension RevokerConfiguration {
    /// Every provider this build serves: one line per provider.
    public static let plugins: [RegisteredProvider] = [.init(ApplePlugin.self), .init(GooglePlugin.self), .init(FacebookPlugin.self)]
}

extension AuditEventKind {
    /// The store's kinds and those every registered provider names for its messages.
    public static let everyKnown = known(adding: RevokerConfiguration.plugins.flatMap { $0.closedInboxes.map(\.source.auditEvent) })
}

/// A provider plug-in as the assembly holds it, before its settings are read.
public struct RegisteredProvider: Sendable {
    public let name: ProviderName
    let fileKeys: [String: SettingShape]
    let variables: [SettingVariable]
    let howToAddApps: String
    /// Its inboxes when no provider is made.
    let closedInboxes: [any ProviderInbox]
    let read: @Sendable (SettingsSource, inout SecretFiles) throws -> ConfiguredProvider

    init<Plugin: ProviderPlugin>(_ plugin: Plugin.Type) {
        name = plugin.name
        fileKeys = plugin.fileKeys
        variables = plugin.variables
        howToAddApps = plugin.howToAddApps
        closedInboxes = plugin.closedInboxes
        read = { source, secretFiles in ConfiguredProvider(plugin, settings: try plugin.settings(from: source, secretFiles: &secretFiles)) }
    }
}

/// A registered provider with its settings read: what the assembly makes, checks and asks.
public struct ConfiguredProvider: Sendable {
    public let name: ProviderName
    public let settings: any ProviderSettings
    let make: @Sendable (ProviderHTTPClients, ProviderContext) async throws -> ProviderParts
    let check: @Sendable (ProviderHTTPClients?, ProviderContext) async -> ProviderCheckReport

    init<Plugin: ProviderPlugin>(_ plugin: Plugin.Type, settings: Plugin.Settings) {
        name = plugin.name
        self.settings = settings
        make = { try await plugin.make(settings, clients: $0, context: $1) }
        check = { await plugin.check(settings, online: $0, context: $1) }
    }
}
