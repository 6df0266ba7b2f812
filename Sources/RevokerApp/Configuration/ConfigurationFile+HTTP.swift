import Foundation
import RevokerEvidence
import RevokerHTTP

extension ConfigurationFile {
    struct HTTPEntry: Decodable {
        var host: String?
        var port: Int?
        var maxBodyBytes: Int?
        var headerTimeoutSeconds: Double?
        var bodyTimeoutSeconds: Double?
        var idleTimeoutSeconds: Double?
        var maxConnections: Int?
        var databaseTimeoutSeconds: Double?
        var apiKeys: [APIKeyEntry]?
        var ui: UIEntry?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case host, port, ui
            case maxBodyBytes = "max_body_bytes"
            case headerTimeoutSeconds = "header_timeout_seconds"
            case bodyTimeoutSeconds = "body_timeout_seconds"
            case idleTimeoutSeconds = "idle_timeout_seconds"
            case maxConnections = "max_connections"
            case databaseTimeoutSeconds = "database_timeout_seconds"
            case apiKeys = "api_keys"
        }

        struct APIKeyEntry: Decodable {
            var name: String
            var sha256: String
            var scopes: [String]
            var clientIDs: [String]?

            enum CodingKeys: String, CodingKey, CaseIterable {
                case name, sha256, scopes
                case clientIDs = "client_ids"
            }
        }

        func settings(source: String) throws -> HTTPSettings {
            var http = HTTPSettings()
            if let host { http.host = host }
            if let port {
                guard (0...65_535).contains(port) else {
                    throw ConfigurationError("http.port in \(source) must be between 0 (any free port) and 65535.")
                }
                http.port = port
            }
            if let maxBodyBytes {
                guard (1024...16_777_216).contains(maxBodyBytes) else {
                    throw ConfigurationError("http.max_body_bytes in \(source) must be between 1024 and 16777216.")
                }
                http.maxBodyBytes = maxBodyBytes
            }
            func seconds(_ value: Double?, _ name: String, _ range: ClosedRange<Double>) throws -> Duration? {
                try ConfigurationFile.seconds(value, "http.\(name)", range, source: source)
            }
            http.headerTimeout = try seconds(headerTimeoutSeconds, "header_timeout_seconds", 0.1...300) ?? http.headerTimeout
            http.bodyTimeout = try seconds(bodyTimeoutSeconds, "body_timeout_seconds", 0.1...600) ?? http.bodyTimeout
            http.idleTimeout = try seconds(idleTimeoutSeconds, "idle_timeout_seconds", 0.1...3600) ?? http.idleTimeout
            http.databaseTimeout = try seconds(databaseTimeoutSeconds, "database_timeout_seconds", 0.1...60) ?? http.databaseTimeout
            if let maxConnections {
                guard (1...100_000).contains(maxConnections) else {
                    throw ConfigurationError("http.max_connections in \(source) must be between 1 and 100000.")
                }
                http.maxConnections = maxConnections
            }
            for (index, entry) in (apiKeys ?? []).enumerated() {
                let place = "http.api_keys[\(index)] in \(source)"
                guard (1...64).contains(entry.name.count), entry.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
                else {
                    throw ConfigurationError("\(place): name must be 1-64 letters, digits, '-', '_' or '.'.")
                }
                guard !http.apiKeys.contains(where: { $0.name == entry.name }) else {
                    throw ConfigurationError("\(place): the name '\(entry.name)' is used twice.")
                }
                guard let digest = [UInt8](hex: entry.sha256), digest.count == 32 else {
                    throw ConfigurationError("\(place): sha256 must be 64 hex digits (the SHA-256 of the key; `revoker api-key` prints it).")
                }
                var scopes: Set<APIScope> = []
                for name in entry.scopes {
                    guard let scope = APIScope(rawValue: name) else {
                        let known = APIScope.allCases.map(\.rawValue).joined(separator: ", ")
                        throw ConfigurationError("\(place): unknown scope '\(name.prefix(40))'; known: \(known).")
                    }
                    scopes.insert(scope)
                }
                guard !scopes.isEmpty else { throw ConfigurationError("\(place): scopes must name at least one scope.") }
                if let clientIDs = entry.clientIDs, clientIDs.isEmpty {
                    throw ConfigurationError("\(place): client_ids must name at least one app, or be left out for every app.")
                }
                http.apiKeys.append(.init(name: entry.name, sha256: digest, scopes: scopes, clientIDs: entry.clientIDs.map(Set.init)))
            }
            http.ui = try ui?.settings(source: source)
            return http
        }
    }
}

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
