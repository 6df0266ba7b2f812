import Foundation
import GoogleSignIn

extension ConfigurationFile {
    /// `google`: where Google is (the sandbox's address in tests) and the Google apps.
    struct GoogleEntry: Decodable {
        var oauthBaseURL: String?
        var certsURL: String?
        var riscConfigurationURL: String?
        var apps: [GoogleAppEntry]?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case oauthBaseURL = "oauth_base_url"
            case certsURL = "certs_url"
            case riscConfigurationURL = "risc_configuration_url"
            case apps
        }
    }

    /// One Google OAuth client.
    struct GoogleAppEntry: Decodable {
        var clientID: String?
        var clientSecretFile: String?
        var audiences: [String]?
        var redirectURI: String?
        var maxRequestsPerSecond: Double?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientID = "client_id"
            case clientSecretFile = "client_secret_file"
            case audiences
            case redirectURI = "redirect_uri"
            case maxRequestsPerSecond = "max_requests_per_second"
        }

        func load(where place: String, secretFiles: inout SecretFiles) throws -> GoogleApp {
            guard let clientID, let clientSecretFile else {
                let missing = [("client_id", clientID), ("client_secret_file", clientSecretFile)].filter { $0.1 == nil }.map(\.0)
                throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
            }
            let app = try RevokerConfiguration.googleApp(
                clientID: clientID,
                secretFile: clientSecretFile,
                audiences: audiences ?? [],
                redirectURI: redirectURI,
                place: place
            )
            secretFiles.check(clientSecretFile, holding: "the Google client secret of \(clientID)")
            return app
        }
    }

    /// Refuses unknown keys in `google` and its apps.
    static func rejectUnknownGoogleKeys(_ top: [String: Any], path: String) throws {
        guard let google = top["google"] else { return }
        guard let google = google as? [String: Any] else { throw ConfigurationError("google in '\(path)' must be an object.") }
        try rejectUnknownKeys(google, allowed: GoogleEntry.CodingKeys.allCases.map(\.rawValue), place: "google", path: path)
        for (index, app) in (google["apps"] as? [Any] ?? []).enumerated() {
            guard let app = app as? [String: Any] else { throw ConfigurationError("google.apps[\(index)] in '\(path)' must be an object.") }
            try rejectUnknownKeys(app, allowed: GoogleAppEntry.CodingKeys.allCases.map(\.rawValue), place: "google.apps[\(index)]", path: path)
        }
    }
}

extension RevokerConfiguration {
    /// Loads the Google side: the file's `google` section, then the one-app environment variables.
    static func loadGoogle(
        environment: [String: String],
        entry: ConfigurationFile.GoogleEntry?,
        place: String,
        secretFiles: inout SecretFiles
    ) throws -> (apps: [String: GoogleApp], client: GoogleClient.Configuration) {
        let value = { (name: String) in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let oauthBaseURL = value(Variable.googleOAuthBaseURL) ?? entry?.oauthBaseURL ?? GoogleClient.Configuration.googleOAuthBaseURL
        let certsURL = value(Variable.googleCertsURL) ?? entry?.certsURL ?? GoogleClient.Configuration.googleCertsURL
        let riscURL =
            value(Variable.googleRISCConfigurationURL) ?? entry?.riscConfigurationURL ?? GoogleClient.Configuration.googleRISCConfigurationURL
        let urls = [
            (oauthBaseURL, "\(Variable.googleOAuthBaseURL) or \"google.oauth_base_url\""),
            (certsURL, "\(Variable.googleCertsURL) or \"google.certs_url\""),
            (riscURL, "\(Variable.googleRISCConfigurationURL) or \"google.risc_configuration_url\""),
        ]
        for (url, setting) in urls {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ConfigurationError("The Google URL '\(url.prefix(200))' (\(setting)) is not an http(s) URL.")
            }
        }
        var apps: [String: GoogleApp] = [:]
        for (index, app) in (entry?.apps ?? []).enumerated() {
            let loaded = try app.load(where: "google.apps[\(index)] (\(app.clientID ?? "no client_id")) in \(place)", secretFiles: &secretFiles)
            guard apps[loaded.clientID] == nil else {
                throw ConfigurationError("The Google client_id '\(loaded.clientID)' appears twice in \(place).")
            }
            apps[loaded.clientID] = loaded
        }
        let present = [Variable.googleClientID, Variable.googleClientSecretFile].filter { value($0) != nil }
        if !present.isEmpty {
            guard let clientID = value(Variable.googleClientID), let secretFile = value(Variable.googleClientSecretFile) else {
                let missing = [Variable.googleClientID, Variable.googleClientSecretFile].filter { value($0) == nil }
                throw ConfigurationError("The Google app in the environment is incomplete: set \(missing.joined(separator: ", ")).")
            }
            let audiences = value(Variable.googleAudiences).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
            apps[clientID] = try googleApp(
                clientID: clientID,
                secretFile: secretFile,
                audiences: audiences,
                redirectURI: value(Variable.googleRedirectURI),
                place: "the environment (\(Variable.googleClientID), \(Variable.googleClientSecretFile))"
            )
            secretFiles.check(secretFile, holding: "the Google client secret")
        }
        return (apps, GoogleClient.Configuration(oauthBaseURL: oauthBaseURL, certsURL: certsURL, riscConfigurationURL: riscURL))
    }

    static func googleApp(clientID: String, secretFile: String, audiences: [String], redirectURI: String?, place: String) throws -> GoogleApp {
        do {
            let secret = try GoogleClientSecret.load(contentsOfFile: secretFile, clientID: clientID)
            return try GoogleApp(clientID: clientID, clientSecret: secret, audiences: audiences, defaultRedirectURI: redirectURI)
        } catch let error as GoogleSignInError {
            throw ConfigurationError("\(error.message) (\(place))")
        }
    }
}
