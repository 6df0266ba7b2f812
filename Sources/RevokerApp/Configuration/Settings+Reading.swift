import Configuration
import Foundation
import RevokerEvidence
import RevokerHTTP
import RevokerProvider
import RevokerWebhooks
import RevokerWorker

// Each library's settings read from its section, here at the edge: no library reads configuration.

extension WorkerSettings {
    /// `worker`.
    init(reading source: SettingsSource) throws {
        self.init()
        concurrency = try source.int("concurrency", in: 1...1024) ?? concurrency
        batchSize = try source.int("batch_size", in: 1...1000) ?? batchSize
        lease = try source.seconds("lease_seconds", in: 5...3600) ?? lease
        maxAttempts = try source.int("max_attempts", in: 1...100) ?? maxAttempts
        pollInterval = try source.seconds("poll_interval_seconds", in: 0.05...600) ?? pollInterval
        retryBase = try source.seconds("retry_base_seconds", in: 0.01...3600) ?? retryBase
        retryCap = try source.seconds("retry_cap_seconds", in: 0.01...86_400) ?? retryCap
        pauseProbeInterval = try source.seconds("pause_probe_seconds", in: 0.1...86_400) ?? pauseProbeInterval
        shutdownGrace = try source.seconds("shutdown_grace_seconds", in: 0...600) ?? shutdownGrace
        clientSecretLifetime = try source.seconds("client_secret_lifetime_seconds", in: 1...15_777_000) ?? clientSecretLifetime
        if source.reader.double(forKey: "provider_timeout_seconds") != nil, source.reader.double(forKey: "apple_timeout_seconds") != nil {
            throw ConfigurationError(
                "worker.provider_timeout_seconds and worker.apple_timeout_seconds (its older name) are both set in \(source.place); keep one."
            )
        }
        providerTimeout =
            try source.seconds("provider_timeout_seconds", in: 0.1...120) ?? source.seconds("apple_timeout_seconds", in: 0.1...120)
            ?? providerTimeout
        maxRequestsPerSecond = try source.double("max_requests_per_second", in: SettingsSource.requestsPerSecond)
    }
}

extension HTTPSettings {
    /// `http`, with its API keys and `ui`.
    init(reading source: SettingsSource) throws {
        self.init()
        host = source.reader.string(forKey: "host") ?? host
        if let port = source.reader.int(forKey: "port") {
            guard (0...65_535).contains(port) else {
                throw ConfigurationError("\(source.origin("port")) must be between 0 (any free port) and 65535.")
            }
            self.port = port
        }
        maxBodyBytes = try source.int("max_body_bytes", in: 1024...16_777_216) ?? maxBodyBytes
        headerTimeout = try source.seconds("header_timeout_seconds", in: 0.1...300) ?? headerTimeout
        bodyTimeout = try source.seconds("body_timeout_seconds", in: 0.1...600) ?? bodyTimeout
        idleTimeout = try source.seconds("idle_timeout_seconds", in: 0.1...3600) ?? idleTimeout
        databaseTimeout = try source.seconds("database_timeout_seconds", in: 0.1...60) ?? databaseTimeout
        grantExchangeWait = try source.seconds("grant_exchange_wait_seconds", in: 0...30) ?? grantExchangeWait
        maxConnections = try source.int("max_connections", in: 1...100_000) ?? maxConnections
        publicURL = try source.origin(forKey: "public_url")
        for entry in source.entries("api_keys") {
            let key = try APIKey(reading: entry)
            guard !apiKeys.contains(where: { $0.name == key.name }) else {
                throw ConfigurationError("\(entry.name) in \(source.place): the name '\(key.name)' is used twice.")
            }
            apiKeys.append(key)
        }
        ui = try UISettings(reading: source.scoped(to: "ui"))
    }
}

extension APIKey {
    /// One of `http.api_keys`.
    init(reading entry: SettingsSource) throws {
        let place = "\(entry.name) in \(entry.place)"
        let name = entry.reader.string(forKey: "name")
        let sha256 = entry.reader.string(forKey: "sha256")
        let scopeNames = entry.reader.stringArray(forKey: "scopes")
        for (key, present) in [("name", name != nil), ("sha256", sha256 != nil), ("scopes", scopeNames != nil)] where !present {
            throw ConfigurationError("In \(entry.place), \(entry.name).\(key) is missing.")
        }
        guard let name, let sha256, let scopeNames else { throw ConfigurationError("In \(entry.place), \(entry.name) is incomplete.") }
        guard (1...64).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
            throw ConfigurationError("\(place): name must be 1-64 letters, digits, '-', '_' or '.'.")
        }
        guard let digest = [UInt8](hex: sha256), digest.count == 32 else {
            throw ConfigurationError("\(place): sha256 must be 64 hex digits (the SHA-256 of the key; `revoker api-key` prints it).")
        }
        var scopes: Set<APIScope> = []
        for scopeName in scopeNames {
            guard let scope = APIScope(rawValue: scopeName) else {
                let known = APIScope.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigurationError("\(place): unknown scope '\(scopeName.prefix(40))'; known: \(known).")
            }
            scopes.insert(scope)
        }
        guard !scopes.isEmpty else { throw ConfigurationError("\(place): scopes must name at least one scope.") }
        let clientIDs = entry.reader.stringArray(forKey: "client_ids")
        if let clientIDs, clientIDs.isEmpty {
            throw ConfigurationError("\(place): client_ids must name at least one app, or be left out for every app.")
        }
        self.init(name: name, sha256: digest, scopes: scopes, clientIDs: clientIDs.map(Set.init))
    }
}

extension UISettings {
    /// `http.ui`: the compliance pages, served only with `"enabled": true`.
    init?(reading source: SettingsSource) throws {
        guard source.reader.bool(forKey: "enabled") == true else { return nil }
        self.init()
        publicURL = try source.origin(forKey: "public_url")
        if let hours = try source.double("session_hours", in: 0.1...168) { sessionLifetime = .seconds(hours * 3600) }
        if let minutes = try source.double("idle_minutes", in: 1...1440) { idleTimeout = .seconds(minutes * 60) }
        guard idleTimeout <= sessionLifetime else {
            throw ConfigurationError("http.ui.idle_minutes in \(source.place) must not be longer than http.ui.session_hours.")
        }
    }
}

extension WebhookSettings {
    /// `webhook_delivery`.
    init(reading source: SettingsSource) throws {
        self.init()
        timeout = try source.seconds("timeout_seconds", in: 0.1...120) ?? timeout
        retryBase = try source.seconds("retry_base_seconds", in: 0.01...3600) ?? retryBase
        retryCap = try source.seconds("retry_cap_seconds", in: 0.01...86_400) ?? retryCap
        parkAfter = try source.seconds("park_after_seconds", in: 0.1...604_800) ?? parkAfter
        pollInterval = try source.seconds("poll_interval_seconds", in: 0.05...600) ?? pollInterval
        lease = try source.seconds("lease_seconds", in: 5...3600) ?? lease
        drainLimit = try source.seconds("drain_seconds", in: 1...3600) ?? drainLimit
        guard lease > timeout else {
            throw ConfigurationError("webhook_delivery.lease_seconds in \(source.place) must be longer than timeout_seconds.")
        }
        fromStart = source.reader.bool(forKey: "from_start") ?? fromStart
    }
}

extension WebhookEndpoint {
    /// One of `webhooks`, its secret read from its file; `apps` are the configured client_ids.
    init(reading entry: SettingsSource, apps: Set<String>, secretFiles: inout SecretFiles) throws {
        let place = "\(entry.name) in \(entry.place)"
        let name = entry.reader.string(forKey: "name")
        let url = entry.reader.string(forKey: "url")
        let secretFile = entry.reader.string(forKey: "secret_file")
        let clientIDs = entry.reader.stringArray(forKey: "client_ids")
        guard let name, let url, let secretFile, let clientIDs else {
            let missing =
                [("name", name), ("url", url), ("secret_file", secretFile)].filter { $0.1 == nil }.map(\.0) + (clientIDs == nil ? ["client_ids"] : [])
            throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
        }
        guard (1...64).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
            throw ConfigurationError("\(place): name must be 1-64 letters, digits, '-', '_' or '.'.")
        }
        guard let parsed = URLComponents(string: url), let scheme = parsed.scheme?.lowercased(), let host = parsed.host, !host.isEmpty,
            parsed.user == nil, parsed.password == nil
        else {
            throw ConfigurationError("\(place): url must be an absolute https:// URL without user or password.")
        }
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw ConfigurationError("\(place): url must use https:// (plain http:// only to a loopback address, for tests).")
        }
        guard !clientIDs.isEmpty else { throw ConfigurationError("\(place): client_ids must name at least one app.") }
        if let unknown = clientIDs.first(where: { !apps.contains($0) }) {
            throw ConfigurationError("\(place): client_ids names '\(unknown.prefix(255))', which no configured app has.")
        }
        guard let data = FileManager.default.contents(atPath: secretFile), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("\(place): the secret file '\(secretFile)' cannot be read.")
        }
        guard let secret = WebhookSecret(text) else {
            throw ConfigurationError(
                "\(place): the secret file '\(secretFile)' must hold whsec_ and the base64 of 24-64 bytes, as `revoker keygen --webhook` prints."
            )
        }
        secretFiles.check(secretFile, holding: "the signing secret of webhook \(name)")
        self.init(name: name, url: url, secret: secret, clientIDs: Set(clientIDs))
    }
}

extension SettingsSource {
    /// An origin such as `https://revoker.example.com`, or nil when the key is not set.
    func origin(forKey key: String) throws -> URL? {
        guard let text = reader.string(forKey: ConfigKey(key)) else { return nil }
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
            url.path.isEmpty || url.path == "/", url.query == nil, url.user == nil
        else {
            throw ConfigurationError("\(origin(key)) must be an origin such as https://revoker.example.com (no path, query or user).")
        }
        return url
    }
}
