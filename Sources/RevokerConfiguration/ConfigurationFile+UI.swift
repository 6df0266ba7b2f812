import Foundation
import RevokerHTTP

extension ConfigurationFile.HTTPEntry {
    /// `http.ui`: the compliance pages, served only with `"enabled": true`.
    struct UIEntry: Decodable {
        var enabled: Bool?
        var publicURL: String?
        var sessionHours: Double?
        var idleMinutes: Double?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case enabled
            case publicURL = "public_url"
            case sessionHours = "session_hours"
            case idleMinutes = "idle_minutes"
        }

        func settings(source: String) throws -> UISettings? {
            guard enabled == true else { return nil }
            var ui = UISettings()
            if let publicURL {
                guard let url = URL(string: publicURL), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                    url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil
                else {
                    throw ConfigurationError(
                        "http.ui.public_url in \(source) must be an origin such as https://revoker.example.com (no path, query or user)."
                    )
                }
                ui.publicURL = url
            }
            if let hours = try ConfigurationFile.inRange(sessionHours, "http.ui.session_hours", 0.1...168, source: source) {
                ui.sessionLifetime = .seconds(hours * 3600)
            }
            if let minutes = try ConfigurationFile.inRange(idleMinutes, "http.ui.idle_minutes", 1...1440, source: source) {
                ui.idleTimeout = .seconds(minutes * 60)
            }
            guard ui.idleTimeout <= ui.sessionLifetime else {
                throw ConfigurationError("http.ui.idle_minutes in \(source) must not be longer than http.ui.session_hours.")
            }
            return ui
        }
    }
}
