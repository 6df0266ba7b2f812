import AppleSignIn
import Foundation
import RevokerHTTP
import RevokerWebhooks
import RevokerWorker

/// The JSON configuration file, read strictly: unknown keys are errors, so a typo is not a silent default.
struct ConfigurationFile: Decodable {
    var databaseURL: String?
    var appleBaseURL: String?
    var extraTrustRootsFile: String?
    var sealingKeysFile: String?
    var intakeKeysFile: String?
    var apps: [AppEntry] = []
    var worker: WorkerEntry?
    var http: HTTPEntry?
    var appleNotifications: AppleNotificationsEntry?
    var webhooks: [WebhookEntry] = []
    var webhookDelivery: WebhookDeliveryEntry?
    var audit: AuditEntry?
    var google: GoogleEntry?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case databaseURL = "database_url"
        case appleBaseURL = "apple_base_url"
        case extraTrustRootsFile = "extra_trust_roots_file"
        case sealingKeysFile = "sealing_keys_file"
        case intakeKeysFile = "intake_keys_file"
        case apps, worker, http
        case appleNotifications = "apple_notifications"
        case webhooks
        case webhookDelivery = "webhook_delivery"
        case audit
        case google
    }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        databaseURL = try container.decodeIfPresent(String.self, forKey: .databaseURL)
        appleBaseURL = try container.decodeIfPresent(String.self, forKey: .appleBaseURL)
        extraTrustRootsFile = try container.decodeIfPresent(String.self, forKey: .extraTrustRootsFile)
        sealingKeysFile = try container.decodeIfPresent(String.self, forKey: .sealingKeysFile)
        intakeKeysFile = try container.decodeIfPresent(String.self, forKey: .intakeKeysFile)
        apps = try container.decodeIfPresent([AppEntry].self, forKey: .apps) ?? []
        worker = try container.decodeIfPresent(WorkerEntry.self, forKey: .worker)
        http = try container.decodeIfPresent(HTTPEntry.self, forKey: .http)
        appleNotifications = try container.decodeIfPresent(AppleNotificationsEntry.self, forKey: .appleNotifications)
        webhooks = try container.decodeIfPresent([WebhookEntry].self, forKey: .webhooks) ?? []
        webhookDelivery = try container.decodeIfPresent(WebhookDeliveryEntry.self, forKey: .webhookDelivery)
        audit = try container.decodeIfPresent(AuditEntry.self, forKey: .audit)
        google = try container.decodeIfPresent(GoogleEntry.self, forKey: .google)
    }

    /// `value` when it lies in `range`; otherwise an error naming `setting` (`worker.batch_size`)
    /// and where it was set.
    static func inRange<T: Comparable>(_ value: T?, _ setting: String, _ range: ClosedRange<T>, source: String) throws -> T? {
        guard let value else { return nil }
        guard range.contains(value) else {
            throw ConfigurationError("\(setting) in \(source) must be between \(range.lowerBound) and \(range.upperBound).")
        }
        return value
    }

    /// The range of every `max_requests_per_second`: calls per second to a provider, by all workers together.
    static let requestsPerSecond = 0.1...100_000.0

    /// A setting in seconds, checked as ``inRange(_:_:_:source:)`` does.
    static func seconds(_ value: Double?, _ setting: String, _ range: ClosedRange<Double>, source: String) throws -> Duration? {
        try inRange(value, setting, range, source: source).map { .milliseconds(Int64($0 * 1000)) }
    }

    /// One receiver of events.
    struct WebhookEntry: Decodable {
        var name: String?
        var url: String?
        var secretFile: String?
        var clientIDs: [String]?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case name, url
            case secretFile = "secret_file"
            case clientIDs = "client_ids"
        }

        /// The endpoint, its secret read from its file; `apps` are the configured client_ids.
        func load(where place: String, apps: Set<String>, secretFiles: inout SecretFiles) throws -> WebhookEndpoint {
            guard let name, let url, let secretFile, let clientIDs else {
                let missing =
                    [("name", name), ("url", url), ("secret_file", secretFile)].filter { $0.1 == nil }.map(\.0)
                    + (clientIDs == nil ? ["client_ids"] : [])
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
            return WebhookEndpoint(name: name, url: url, secret: secret, clientIDs: Set(clientIDs))
        }
    }

    /// The audit trail's evidence: signing key, earlier public keys, checkpoint interval.
    struct AuditEntry: Decodable {
        var signingKeyFile: String?
        var publicKeyFiles: [String]?
        var checkpointIntervalSeconds: Double?
        var witnessPath: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case signingKeyFile = "signing_key_file"
            case publicKeyFiles = "public_key_files"
            case checkpointIntervalSeconds = "checkpoint_interval_seconds"
            case witnessPath = "witness_path"
        }
    }

    /// How webhooks are delivered.
    struct WebhookDeliveryEntry: Decodable {
        var timeoutSeconds: Double?
        var retryBaseSeconds: Double?
        var retryCapSeconds: Double?
        var parkAfterSeconds: Double?
        var pollIntervalSeconds: Double?
        var leaseSeconds: Double?
        var drainSeconds: Double?
        var fromStart: Bool?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case leaseSeconds = "lease_seconds"
            case timeoutSeconds = "timeout_seconds"
            case retryBaseSeconds = "retry_base_seconds"
            case retryCapSeconds = "retry_cap_seconds"
            case parkAfterSeconds = "park_after_seconds"
            case pollIntervalSeconds = "poll_interval_seconds"
            case drainSeconds = "drain_seconds"
            case fromStart = "from_start"
        }

        func settings(source: String) throws -> WebhookSettings {
            var settings = WebhookSettings()
            func seconds(_ value: Double?, _ name: String, _ range: ClosedRange<Double>) throws -> Duration? {
                try ConfigurationFile.seconds(value, "webhook_delivery.\(name)", range, source: source)
            }
            settings.timeout = try seconds(timeoutSeconds, "timeout_seconds", 0.1...120) ?? settings.timeout
            settings.retryBase = try seconds(retryBaseSeconds, "retry_base_seconds", 0.01...3600) ?? settings.retryBase
            settings.retryCap = try seconds(retryCapSeconds, "retry_cap_seconds", 0.01...86_400) ?? settings.retryCap
            settings.parkAfter = try seconds(parkAfterSeconds, "park_after_seconds", 0.1...604_800) ?? settings.parkAfter
            settings.pollInterval = try seconds(pollIntervalSeconds, "poll_interval_seconds", 0.05...600) ?? settings.pollInterval
            settings.lease = try seconds(leaseSeconds, "lease_seconds", 5...3600) ?? settings.lease
            settings.drainLimit = try seconds(drainSeconds, "drain_seconds", 1...3600) ?? settings.drainLimit
            guard settings.lease > settings.timeout else {
                throw ConfigurationError("webhook_delivery.lease_seconds in \(source) must be longer than timeout_seconds.")
            }
            settings.fromStart = fromStart ?? settings.fromStart
            return settings
        }
    }

    /// How `revoker serve` receives Apple's server-to-server notifications.
    struct AppleNotificationsEntry: Decodable {
        var enabled: Bool?
        var issuers: [String]?
        var clockSkewSeconds: Double?
        var maxAgeSeconds: Double?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case enabled, issuers
            case clockSkewSeconds = "clock_skew_seconds"
            case maxAgeSeconds = "max_age_seconds"
        }

        /// The verifier's settings for `clientIDs`, or nil when receiving is switched off.
        func settings(clientIDs: Set<String>, source: String) throws -> AppleNotificationVerifier.Settings? {
            guard enabled ?? true else { return nil }
            var settings = AppleNotificationVerifier.Settings(clientIDs: clientIDs)
            if let issuers {
                guard !issuers.isEmpty, issuers.allSatisfy({ (1...255).contains($0.count) && !$0.contains(where: \.isWhitespace) }) else {
                    throw ConfigurationError("apple_notifications.issuers in \(source) must list at least one issuer, each without spaces.")
                }
                settings.issuers = Set(issuers)
            }
            settings.clockSkew =
                try ConfigurationFile.seconds(clockSkewSeconds, "apple_notifications.clock_skew_seconds", 0...600, source: source)
                ?? settings.clockSkew
            settings.maximumAge =
                try ConfigurationFile.seconds(maxAgeSeconds, "apple_notifications.max_age_seconds", 60...2_592_000, source: source)
                ?? settings.maximumAge
            return settings
        }
    }

    struct AppEntry: Decodable {
        var clientID: String?
        var teamID: String?
        var keyID: String?
        var privateKeyFile: String?
        var redirectURI: String?
        var maxRequestsPerSecond: Double?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientID = "client_id"
            case teamID = "team_id"
            case keyID = "key_id"
            case privateKeyFile = "private_key_file"
            case redirectURI = "redirect_uri"
            case maxRequestsPerSecond = "max_requests_per_second"
        }

        func load(where place: String) throws -> AppleAppSettings {
            guard let clientID, let teamID, let keyID, let privateKeyFile else {
                let missing = [("client_id", clientID), ("team_id", teamID), ("key_id", keyID), ("private_key_file", privateKeyFile)]
                    .filter { $0.1 == nil }.map(\.0)
                throw ConfigurationError("\(place) lacks \(missing.joined(separator: ", ")).")
            }
            do {
                let apple = try AppleApp(
                    clientID: clientID,
                    teamID: teamID,
                    keyID: keyID,
                    signingKey: AppleSigningKey.load(contentsOfFile: privateKeyFile)
                )
                return .init(apple: apple, defaultRedirectURI: redirectURI)
            } catch {
                throw ConfigurationError("\(error.message) (\(place))")
            }
        }
    }

    struct WorkerEntry: Decodable {
        var concurrency: Int?
        var batchSize: Int?
        var leaseSeconds: Double?
        var maxAttempts: Int?
        var pollIntervalSeconds: Double?
        var retryBaseSeconds: Double?
        var retryCapSeconds: Double?
        var pauseProbeSeconds: Double?
        var shutdownGraceSeconds: Double?
        var clientSecretLifetimeSeconds: Double?
        var providerTimeoutSeconds: Double?
        /// The older name of `provider_timeout_seconds`, still read.
        var appleTimeoutSeconds: Double?
        var maxRequestsPerSecond: Double?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case concurrency
            case batchSize = "batch_size"
            case leaseSeconds = "lease_seconds"
            case maxAttempts = "max_attempts"
            case pollIntervalSeconds = "poll_interval_seconds"
            case retryBaseSeconds = "retry_base_seconds"
            case retryCapSeconds = "retry_cap_seconds"
            case pauseProbeSeconds = "pause_probe_seconds"
            case shutdownGraceSeconds = "shutdown_grace_seconds"
            case clientSecretLifetimeSeconds = "client_secret_lifetime_seconds"
            case providerTimeoutSeconds = "provider_timeout_seconds"
            case appleTimeoutSeconds = "apple_timeout_seconds"
            case maxRequestsPerSecond = "max_requests_per_second"
        }

        func settings(source: String) throws -> WorkerSettings {
            var worker = WorkerSettings()
            func check<T: Comparable>(_ value: T?, _ name: String, _ range: ClosedRange<T>) throws -> T? {
                try ConfigurationFile.inRange(value, "worker.\(name)", range, source: source)
            }
            func seconds(_ value: Double?, _ name: String, _ range: ClosedRange<Double>) throws -> Duration? {
                try ConfigurationFile.seconds(value, "worker.\(name)", range, source: source)
            }
            worker.concurrency = try check(concurrency, "concurrency", 1...1024) ?? worker.concurrency
            worker.batchSize = try check(batchSize, "batch_size", 1...1000) ?? worker.batchSize
            worker.lease = try seconds(leaseSeconds, "lease_seconds", 5...3600) ?? worker.lease
            worker.maxAttempts = try check(maxAttempts, "max_attempts", 1...100) ?? worker.maxAttempts
            worker.pollInterval = try seconds(pollIntervalSeconds, "poll_interval_seconds", 0.05...600) ?? worker.pollInterval
            worker.retryBase = try seconds(retryBaseSeconds, "retry_base_seconds", 0.01...3600) ?? worker.retryBase
            worker.retryCap = try seconds(retryCapSeconds, "retry_cap_seconds", 0.01...86_400) ?? worker.retryCap
            worker.pauseProbeInterval = try seconds(pauseProbeSeconds, "pause_probe_seconds", 0.1...86_400) ?? worker.pauseProbeInterval
            worker.shutdownGrace = try seconds(shutdownGraceSeconds, "shutdown_grace_seconds", 0...600) ?? worker.shutdownGrace
            worker.clientSecretLifetime =
                try seconds(clientSecretLifetimeSeconds, "client_secret_lifetime_seconds", 1...15_777_000) ?? worker.clientSecretLifetime
            if providerTimeoutSeconds != nil, appleTimeoutSeconds != nil {
                throw ConfigurationError(
                    "worker.provider_timeout_seconds and worker.apple_timeout_seconds (its older name) are both set in \(source); keep one."
                )
            }
            worker.providerTimeout =
                try seconds(providerTimeoutSeconds, "provider_timeout_seconds", 0.1...120)
                ?? seconds(appleTimeoutSeconds, "apple_timeout_seconds", 0.1...120) ?? worker.providerTimeout
            worker.maxRequestsPerSecond = try check(maxRequestsPerSecond, "max_requests_per_second", ConfigurationFile.requestsPerSecond)
            return worker
        }
    }

    /// Reads and checks the file at `path`.
    static func read(_ path: String) throws -> ConfigurationFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                "The configuration file '\(path)' does not exist or cannot be read (--config or \(RevokerConfiguration.Variable.configFile))."
            )
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ConfigurationError("The configuration file '\(path)' is not valid JSON.")
        }
        guard let top = object as? [String: Any] else {
            throw ConfigurationError("The configuration file '\(path)' must hold a JSON object.")
        }
        try rejectUnknownKeys(top, allowed: CodingKeys.allCases.map(\.rawValue), place: "the top level", path: path)
        for (index, app) in (top["apps"] as? [Any] ?? []).enumerated() {
            guard let app = app as? [String: Any] else { throw ConfigurationError("apps[\(index)] in '\(path)' must be an object.") }
            try rejectUnknownKeys(app, allowed: AppEntry.CodingKeys.allCases.map(\.rawValue), place: "apps[\(index)]", path: path)
        }
        try rejectUnknownGoogleKeys(top, path: path)
        if let worker = top["worker"] as? [String: Any] {
            try rejectUnknownKeys(worker, allowed: WorkerEntry.CodingKeys.allCases.map(\.rawValue), place: "worker", path: path)
        }
        for (index, webhook) in (top["webhooks"] as? [Any] ?? []).enumerated() {
            guard let webhook = webhook as? [String: Any] else { throw ConfigurationError("webhooks[\(index)] in '\(path)' must be an object.") }
            try rejectUnknownKeys(webhook, allowed: WebhookEntry.CodingKeys.allCases.map(\.rawValue), place: "webhooks[\(index)]", path: path)
        }
        if let delivery = top["webhook_delivery"] as? [String: Any] {
            try rejectUnknownKeys(delivery, allowed: WebhookDeliveryEntry.CodingKeys.allCases.map(\.rawValue), place: "webhook_delivery", path: path)
        }
        if let audit = top["audit"] as? [String: Any] {
            try rejectUnknownKeys(audit, allowed: AuditEntry.CodingKeys.allCases.map(\.rawValue), place: "audit", path: path)
        }
        if let notifications = top["apple_notifications"] as? [String: Any] {
            try rejectUnknownKeys(
                notifications,
                allowed: AppleNotificationsEntry.CodingKeys.allCases.map(\.rawValue),
                place: "apple_notifications",
                path: path
            )
        }
        if let http = top["http"] as? [String: Any] {
            try rejectUnknownKeys(http, allowed: HTTPEntry.CodingKeys.allCases.map(\.rawValue), place: "http", path: path)
            for (index, key) in (http["api_keys"] as? [Any] ?? []).enumerated() {
                guard let key = key as? [String: Any] else { throw ConfigurationError("http.api_keys[\(index)] in '\(path)' must be an object.") }
                try rejectUnknownKeys(
                    key,
                    allowed: HTTPEntry.APIKeyEntry.CodingKeys.allCases.map(\.rawValue),
                    place: "http.api_keys[\(index)]",
                    path: path
                )
            }
            if let ui = http["ui"] as? [String: Any] {
                try rejectUnknownKeys(ui, allowed: HTTPEntry.UIEntry.CodingKeys.allCases.map(\.rawValue), place: "http.ui", path: path)
            }
        }
        do {
            return try JSONDecoder().decode(ConfigurationFile.self, from: data)
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let field = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw ConfigurationError(
                "In the configuration file '\(path)', \(field.isEmpty ? "a value" : String(field.dropFirst())) has the wrong type."
            )
        } catch let DecodingError.keyNotFound(key, context) {
            let field = (context.codingPath + [key]).map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw ConfigurationError("In the configuration file '\(path)', \(field.dropFirst()) is missing.")
        } catch {
            throw ConfigurationError("The configuration file '\(path)' could not be read as Revoker settings.")
        }
    }

    static func rejectUnknownKeys(_ object: [String: Any], allowed: [String], place: String, path: String) throws {
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ConfigurationError("Unknown setting '\(unknown.prefix(60))' at \(place) of '\(path)'; known: \(allowed.joined(separator: ", ")).")
        }
    }
}
