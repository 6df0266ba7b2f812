import Configuration
import Foundation
import RevokerProvider

/// Facebook Login's part of the configuration: the `facebook` section (where Facebook is, its
/// apps) and one app from the `FACEBOOK_*` variables.
public struct FacebookSettings: ProviderSettings {
    /// The apps served, by app id.
    public var apps: [String: FacebookApp] = [:]
    public var requestsPerSecond: [String: Double] = [:]
    /// Where Facebook is (its production endpoints unless set); the timeout is the worker's.
    public var client = FacebookClient.Configuration()

    public init(apps: [String: FacebookApp] = [:], client: FacebookClient.Configuration = .init()) {
        self.apps = apps
        self.client = client
    }

    public var clientIDs: Set<String> { Set(apps.keys) }
    /// Facebook's callbacks are received only for configured apps.
    public var receivesMessages: Bool { !apps.isEmpty }

    /// The environment variables for one app and for Facebook's addresses.
    public enum Variable {
        public static let appID = "FACEBOOK_APP_ID"
        public static let appSecretFile = "FACEBOOK_APP_SECRET_FILE"
        public static let graphBaseURL = "REVOKER_FACEBOOK_GRAPH_BASE_URL"
        public static let graphVersion = "REVOKER_FACEBOOK_GRAPH_VERSION"
        public static let limitedLoginKeysURL = "REVOKER_FACEBOOK_LIMITED_LOGIN_KEYS_URL"
        public static let limitedLoginUninstallURL = "REVOKER_FACEBOOK_LIMITED_LOGIN_UNINSTALL_URL"
    }

    static let fileKeys: [String: SettingShape] = [
        "facebook": .section([
            "graph_base_url": .string, "graph_version": .string, "limited_login_keys_url": .string, "limited_login_uninstall_url": .string,
            "apps": .entries(["app_id": .string, "app_secret_file": .string, "max_requests_per_second": .number]),
        ])
    ]

    static let variables: [SettingVariable] = [
        .init(Variable.appID, sets: "facebook_app.app_id"),
        .init(Variable.appSecretFile, sets: "facebook_app.app_secret_file"),
        .init(Variable.graphBaseURL, sets: "facebook.graph_base_url"),
        .init(Variable.graphVersion, sets: "facebook.graph_version"),
        .init(Variable.limitedLoginKeysURL, sets: "facebook.limited_login_keys_url"),
        .init(Variable.limitedLoginUninstallURL, sets: "facebook.limited_login_uninstall_url"),
    ]

    /// Reads the settings from the top level of `source`.
    init(from source: SettingsSource, secretFiles: inout SecretFiles) throws {
        let facebook = source.scoped(to: "facebook")
        let urls = [
            ("graph_base_url", Variable.graphBaseURL, FacebookClient.Configuration.graphBaseURL),
            ("limited_login_keys_url", Variable.limitedLoginKeysURL, FacebookClient.Configuration.limitedLoginKeysURL),
            ("limited_login_uninstall_url", Variable.limitedLoginUninstallURL, FacebookClient.Configuration.limitedLoginUninstallURL),
        ].map { key, variable, production in
            (facebook.reader.string(forKey: ConfigKey(key)) ?? production, "\(variable) or \"facebook.\(key)\"")
        }
        for (url, setting) in urls {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ConfigurationError("The Facebook URL '\(url.prefix(200))' (\(setting)) is not an http(s) URL.")
            }
        }
        let version = facebook.reader.string(forKey: "graph_version") ?? FacebookClient.Configuration.graphVersion
        guard Self.isGraphVersion(version) else {
            throw ConfigurationError(
                "The Graph API version '\(version.prefix(40))' (\(Variable.graphVersion) or \"facebook.graph_version\") is not of the form v25.0."
            )
        }
        client = FacebookClient.Configuration(
            graphBaseURL: urls[0].0,
            graphVersion: version,
            limitedLoginKeysURL: urls[1].0,
            limitedLoginUninstallURL: urls[2].0
        )
        for (index, entry) in facebook.entries("apps").enumerated() {
            let appID = entry.reader.string(forKey: "app_id")
            let place = "facebook.apps[\(index)] (\(appID ?? "no app_id")) in \(source.place)"
            guard let appID, let secretFile = entry.reader.string(forKey: "app_secret_file") else {
                let missing = ["app_id", "app_secret_file"].filter { entry.reader.string(forKey: ConfigKey($0)) == nil }
                throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
            }
            let app = try Self.app(appID: appID, secretFile: secretFile, place: place)
            guard apps[appID] == nil else { throw ConfigurationError("The Facebook app id '\(appID)' appears twice in \(source.place).") }
            secretFiles.check(secretFile, holding: "the Facebook app secret of \(appID)")
            apps[appID] = app
            requestsPerSecond[appID] = try entry.double("max_requests_per_second", in: SettingsSource.requestsPerSecond)
        }
        // The environment's app, when either of its two required variables is set.
        let environment = source.scoped(to: "facebook_app")
        let appID = environment.reader.string(forKey: "app_id")
        let secretFile = environment.reader.string(forKey: "app_secret_file")
        if appID != nil || secretFile != nil {
            guard let appID, let secretFile else {
                let missing = [(Variable.appID, appID), (Variable.appSecretFile, secretFile)].filter { $0.1 == nil }.map(\.0)
                throw ConfigurationError("The Facebook app in the environment is incomplete: set \(missing.joined(separator: ", ")).")
            }
            apps[appID] = try Self.app(
                appID: appID,
                secretFile: secretFile,
                place: "the environment (\(Variable.appID), \(Variable.appSecretFile))"
            )
            secretFiles.check(secretFile, holding: "the Facebook app secret")
        }
    }

    /// `v` and a version number, as Graph's paths name a version.
    static func isGraphVersion(_ text: String) -> Bool {
        guard text.hasPrefix("v"), text.utf8.count <= 10 else { return false }
        let parts = text.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
    }

    private static func app(appID: String, secretFile: String, place: String) throws -> FacebookApp {
        do {
            return try FacebookApp(appID: appID, secret: FacebookAppSecret.load(contentsOfFile: secretFile))
        } catch let error as FacebookLoginError {
            throw ConfigurationError("\(error.message) (\(place))")
        }
    }
}
