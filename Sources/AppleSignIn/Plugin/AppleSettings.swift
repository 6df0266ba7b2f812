import Configuration
import Foundation
import RevokerProvider

/// Sign in with Apple's part of the configuration: `apple_base_url`, the apps under `apps`,
/// `apple_notifications`, and one app from the `APPLE_*` variables.
public struct AppleSettings: ProviderSettings {
    /// Apple's base URL, or the sandbox's.
    public var baseURL = AppleClient.Configuration.appleBaseURL
    /// The apps served, by client_id.
    public var apps: [String: AppleAppSettings] = [:]
    public var requestsPerSecond: [String: Double] = [:]
    /// How `serve` verifies Apple's server-to-server notifications; nil when it does not receive them.
    public var notifications: AppleNotificationVerifier.Settings? = .init(clientIDs: [])

    public init(baseURL: String = AppleClient.Configuration.appleBaseURL, apps: [String: AppleAppSettings] = [:]) {
        self.baseURL = baseURL
        self.apps = apps
    }

    public var clientIDs: Set<String> { Set(apps.keys) }
    /// Notifications are received unless switched off.
    public var receivesMessages: Bool { notifications != nil }

    /// The environment variables for one app and for Apple's address.
    public enum Variable {
        public static let baseURL = "REVOKER_APPLE_BASE_URL"
        public static let clientID = "APPLE_CLIENT_ID"
        public static let teamID = "APPLE_TEAM_ID"
        public static let keyID = "APPLE_KEY_ID"
        public static let privateKeyFile = "APPLE_PRIVATE_KEY_FILE"
        public static let privateKey = "APPLE_PRIVATE_KEY"
        public static let redirectURI = "APPLE_REDIRECT_URI"
    }

    static let fileKeys: [String: SettingShape] = [
        "apple_base_url": .string,
        "apps": .entries([
            "client_id": .string, "team_id": .string, "key_id": .string, "private_key_file": .string, "redirect_uri": .string,
            "max_requests_per_second": .number,
        ]),
        "apple_notifications": .section(["enabled": .bool, "issuers": .strings, "clock_skew_seconds": .number, "max_age_seconds": .number]),
    ]

    static let variables: [SettingVariable] = [
        .init(Variable.baseURL, sets: "apple_base_url"),
        .init(Variable.clientID, sets: "apple_app.client_id"),
        .init(Variable.teamID, sets: "apple_app.team_id"),
        .init(Variable.keyID, sets: "apple_app.key_id"),
        .init(Variable.privateKeyFile, sets: "apple_app.private_key_file"),
        .init(Variable.privateKey, sets: "apple_app.private_key", .secretString),
        .init(Variable.redirectURI, sets: "apple_app.redirect_uri"),
    ]

    /// Reads the settings from the top level of `source`.
    init(from source: SettingsSource, secretFiles: inout SecretFiles) throws {
        baseURL = source.reader.string(forKey: "apple_base_url") ?? AppleClient.Configuration.appleBaseURL
        guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ConfigurationError(
                "The Apple base URL '\(baseURL.prefix(200))' (\(Variable.baseURL) or \"apple_base_url\") is not an http(s) URL."
            )
        }
        for (index, entry) in source.entries("apps").enumerated() {
            let clientID = entry.reader.string(forKey: "client_id")
            let app = try Self.app(entry, where: "app \(index + 1) (\(clientID ?? "no client_id")) in \(source.place)", secretFiles: &secretFiles)
            guard apps[app.apple.clientID] == nil else {
                throw ConfigurationError("The client_id '\(app.apple.clientID)' appears twice in \(source.place).")
            }
            apps[app.apple.clientID] = app
            requestsPerSecond[app.apple.clientID] = try entry.double("max_requests_per_second", in: SettingsSource.requestsPerSecond)
        }
        // The environment's app replaces a file's app of the same client_id.
        if let app = try Self.environmentApp(source.scoped(to: "apple_app"), secretFiles: &secretFiles) {
            apps[app.apple.clientID] = app
        }
        notifications = try Self.notifications(source.scoped(to: "apple_notifications"), clientIDs: Set(apps.keys))
    }

    private static func app(_ entry: SettingsSource, where place: String, secretFiles: inout SecretFiles) throws -> AppleAppSettings {
        let value = { (key: String) in entry.reader.string(forKey: ConfigKey(key)) }
        guard let clientID = value("client_id"), let teamID = value("team_id"), let keyID = value("key_id"),
            let privateKeyFile = value("private_key_file")
        else {
            let missing = ["client_id", "team_id", "key_id", "private_key_file"].filter { value($0) == nil }
            throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
        }
        let app: AppleApp
        do {
            app = try AppleApp(clientID: clientID, teamID: teamID, keyID: keyID, signingKey: AppleSigningKey.load(contentsOfFile: privateKeyFile))
        } catch {
            throw ConfigurationError("\(error.message) (\(place))")
        }
        secretFiles.check(privateKeyFile, holding: "the Apple key of \(clientID)")
        return AppleAppSettings(apple: app, defaultRedirectURI: value("redirect_uri"))
    }

    /// The app of the `APPLE_*` variables, when any is set; all of them must be.
    private static func environmentApp(_ source: SettingsSource, secretFiles: inout SecretFiles) throws -> AppleAppSettings? {
        let value = { (key: String) in source.reader.string(forKey: ConfigKey(key), isSecret: key == "private_key") }
        let names = [("client_id", Variable.clientID), ("team_id", Variable.teamID), ("key_id", Variable.keyID)]
        let keyGiven = value("private_key_file") != nil || value("private_key") != nil
        guard names.contains(where: { value($0.0) != nil }) || keyGiven else { return nil }
        let missing = names.filter { value($0.0) == nil }.map(\.1) + (keyGiven ? [] : ["\(Variable.privateKeyFile) (or \(Variable.privateKey))"])
        guard missing.isEmpty, let clientID = value("client_id"), let teamID = value("team_id"), let keyID = value("key_id") else {
            throw ConfigurationError("The app in the environment is incomplete: set \(missing.joined(separator: ", ")).")
        }
        if let path = value("private_key_file") { secretFiles.check(path, holding: "the Apple key") }
        do {
            let key =
                if let path = value("private_key_file") {
                    try AppleSigningKey.load(contentsOfFile: path)
                } else {
                    try AppleSigningKey(pem: value("private_key") ?? "", source: "environment variable \(Variable.privateKey)")
                }
            let apple = try AppleApp(clientID: clientID, teamID: teamID, keyID: keyID, signingKey: key)
            return AppleAppSettings(apple: apple, defaultRedirectURI: value("redirect_uri"))
        } catch {
            throw ConfigurationError("\(error.message) (set through \(Variable.clientID), \(Variable.teamID), \(Variable.keyID)).")
        }
    }

    /// The verifier's settings for `clientIDs`, or nil when `enabled` is false.
    private static func notifications(_ source: SettingsSource, clientIDs: Set<String>) throws -> AppleNotificationVerifier.Settings? {
        guard source.reader.bool(forKey: "enabled") ?? true else { return nil }
        var settings = AppleNotificationVerifier.Settings(clientIDs: clientIDs)
        if let issuers = source.reader.stringArray(forKey: "issuers") {
            guard !issuers.isEmpty, issuers.allSatisfy({ (1...255).contains($0.count) && !$0.contains(where: \.isWhitespace) }) else {
                throw ConfigurationError("\(source.origin("issuers")) must list at least one issuer, each without spaces.")
            }
            settings.issuers = Set(issuers)
        }
        settings.clockSkew = try source.seconds("clock_skew_seconds", in: 0...600) ?? settings.clockSkew
        settings.maximumAge = try source.seconds("max_age_seconds", in: 60...2_592_000) ?? settings.maximumAge
        return settings
    }
}
