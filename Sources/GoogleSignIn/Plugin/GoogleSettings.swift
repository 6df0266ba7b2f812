import Configuration
import Foundation
import RevokerProvider

/// Sign in with Google's part of the configuration: the `google` section (where Google is, its
/// apps) and one app from the `GOOGLE_*` variables.
public struct GoogleSettings: ProviderSettings {
    /// The apps served, by client_id.
    public var apps: [String: GoogleApp] = [:]
    public var requestsPerSecond: [String: Double] = [:]
    /// Where Google is (its production endpoints unless set); the timeout is the worker's.
    public var client = GoogleClient.Configuration()

    public init(apps: [String: GoogleApp] = [:], client: GoogleClient.Configuration = .init()) {
        self.apps = apps
        self.client = client
    }

    public var clientIDs: Set<String> { Set(apps.keys) }
    /// Security events are received only for configured apps.
    public var receivesMessages: Bool { !apps.isEmpty }

    /// The environment variables for one app and for Google's addresses.
    public enum Variable {
        public static let clientID = "GOOGLE_CLIENT_ID"
        public static let clientSecretFile = "GOOGLE_CLIENT_SECRET_FILE"
        public static let audiences = "GOOGLE_AUDIENCES"
        public static let redirectURI = "GOOGLE_REDIRECT_URI"
        public static let oauthBaseURL = "REVOKER_GOOGLE_OAUTH_BASE_URL"
        public static let certsURL = "REVOKER_GOOGLE_CERTS_URL"
        public static let riscConfigurationURL = "REVOKER_GOOGLE_RISC_CONFIGURATION_URL"
    }

    static let fileKeys: [String: SettingShape] = [
        "google": .section([
            "oauth_base_url": .string, "certs_url": .string, "risc_configuration_url": .string,
            "apps": .entries([
                "client_id": .string, "client_secret_file": .string, "audiences": .strings, "redirect_uri": .string,
                "max_requests_per_second": .number,
            ]),
        ])
    ]

    static let variables: [SettingVariable] = [
        .init(Variable.clientID, sets: "google_app.client_id"),
        .init(Variable.clientSecretFile, sets: "google_app.client_secret_file"),
        .init(Variable.audiences, sets: "google_app.audiences", .strings),
        .init(Variable.redirectURI, sets: "google_app.redirect_uri"),
        .init(Variable.oauthBaseURL, sets: "google.oauth_base_url"),
        .init(Variable.certsURL, sets: "google.certs_url"),
        .init(Variable.riscConfigurationURL, sets: "google.risc_configuration_url"),
    ]

    /// Reads the settings from the top level of `source`.
    init(from source: SettingsSource, secretFiles: inout SecretFiles) throws {
        let google = source.scoped(to: "google")
        let urls = [
            ("oauth_base_url", Variable.oauthBaseURL, GoogleClient.Configuration.googleOAuthBaseURL),
            ("certs_url", Variable.certsURL, GoogleClient.Configuration.googleCertsURL),
            ("risc_configuration_url", Variable.riscConfigurationURL, GoogleClient.Configuration.googleRISCConfigurationURL),
        ].map { key, variable, production in
            (google.reader.string(forKey: ConfigKey(key)) ?? production, "\(variable) or \"google.\(key)\"")
        }
        for (url, setting) in urls {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ConfigurationError("The Google URL '\(url.prefix(200))' (\(setting)) is not an http(s) URL.")
            }
        }
        client = GoogleClient.Configuration(oauthBaseURL: urls[0].0, certsURL: urls[1].0, riscConfigurationURL: urls[2].0)
        for (index, entry) in google.entries("apps").enumerated() {
            let clientID = entry.reader.string(forKey: "client_id")
            let place = "google.apps[\(index)] (\(clientID ?? "no client_id")) in \(source.place)"
            guard let clientID, let secretFile = entry.reader.string(forKey: "client_secret_file") else {
                let missing = ["client_id", "client_secret_file"].filter { entry.reader.string(forKey: ConfigKey($0)) == nil }
                throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
            }
            let app = try Self.app(
                clientID: clientID,
                secretFile: secretFile,
                audiences: entry.reader.stringArray(forKey: "audiences") ?? [],
                redirectURI: entry.reader.string(forKey: "redirect_uri"),
                place: place
            )
            guard apps[clientID] == nil else { throw ConfigurationError("The Google client_id '\(clientID)' appears twice in \(source.place).") }
            secretFiles.check(secretFile, holding: "the Google client secret of \(clientID)")
            apps[clientID] = app
            requestsPerSecond[clientID] = try entry.double("max_requests_per_second", in: SettingsSource.requestsPerSecond)
        }
        // The environment's app, when either of its two required variables is set.
        let environment = source.scoped(to: "google_app")
        let clientID = environment.reader.string(forKey: "client_id")
        let secretFile = environment.reader.string(forKey: "client_secret_file")
        if clientID != nil || secretFile != nil {
            guard let clientID, let secretFile else {
                let missing = [(Variable.clientID, clientID), (Variable.clientSecretFile, secretFile)].filter { $0.1 == nil }.map(\.0)
                throw ConfigurationError("The Google app in the environment is incomplete: set \(missing.joined(separator: ", ")).")
            }
            apps[clientID] = try Self.app(
                clientID: clientID,
                secretFile: secretFile,
                audiences: environment.reader.stringArray(forKey: "audiences") ?? [],
                redirectURI: environment.reader.string(forKey: "redirect_uri"),
                place: "the environment (\(Variable.clientID), \(Variable.clientSecretFile))"
            )
            secretFiles.check(secretFile, holding: "the Google client secret")
        }
    }

    private static func app(clientID: String, secretFile: String, audiences: [String], redirectURI: String?, place: String) throws -> GoogleApp {
        do {
            let secret = try GoogleClientSecret.load(contentsOfFile: secretFile, clientID: clientID)
            return try GoogleApp(clientID: clientID, clientSecret: secret, audiences: audiences, defaultRedirectURI: redirectURI)
        } catch let error as GoogleSignInError {
            throw ConfigurationError("\(error.message) (\(place))")
        }
    }
}
