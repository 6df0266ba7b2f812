import AppleSignIn
import AsyncHTTPClient
import Foundation
import GoogleSignIn
import NIOSSL
import PostgresNIO
import RevokerEvidence
import RevokerHTTP
import RevokerProvider
import RevokerStore
import RevokerWebhooks
import RevokerWorker

/// Everything Revoker needs to run, from a JSON file and the environment.
///
/// The file serves many apps; environment variables serve the one-app case and override the
/// file's top-level settings. Secrets are read from files or the environment, never from
/// the command line.
public struct RevokerConfiguration: Sendable {
    /// `postgres://user:password@host:port/database`.
    public var databaseURL: String
    /// Apple's base URL, or the sandbox's.
    public var appleBaseURL: String
    /// Authorities trusted beside the system's for calls to providers, and the file they came
    /// from: a sandbox's throw-away authority, for tests only.
    public var extraTrustRoots: [NIOSSLCertificate] = []
    public var extraTrustRootsFile: String?
    /// Keys sealing credentials at rest (a throw-away key when the command needs none).
    public var keyring: CredentialKeyring
    /// The Apple apps served, by client_id.
    public var apps: [String: AppleAppSettings]
    /// The Google apps served, by client_id.
    public var googleApps: [String: GoogleApp] = [:]
    /// Where Google is (its production endpoints unless set), with the worker's timeout.
    public var google = GoogleClient.Configuration()
    /// Worker tuning.
    public var worker: WorkerSettings
    /// The HTTP API.
    public var http: HTTPSettings = .init()
    /// How `serve` verifies Apple's server-to-server notifications; nil when it does not receive them.
    public var appleNotifications: AppleNotificationVerifier.Settings?
    /// Where the worker processes deliver events.
    public var webhooks: [WebhookEndpoint] = []
    /// How they deliver them.
    public var webhookDelivery = WebhookSettings()
    /// The audit trail's signing key and checkpoints.
    public var audit = AuditSettings()
    /// The intake keys (RSA) of the SQL enqueue path: the first is published for
    /// `revoker.enqueue_revocation` to encrypt to (the last), all of them open what it wrote.
    public var intakeKeys: [IntakeKey] = []
    /// What is unsafe but usable, such as a key file others may read; `--strict` refuses it.
    public var warnings: [String] = []

    /// The client_ids each provider serves; a client_id belongs to one provider only.
    public var clientIDsByProvider: [String: Set<String>] {
        var served = [ProviderName.apple.rawValue: Set(apps.keys)]
        // A provider without apps is not served: requests naming it are refused by provider.
        if !googleApps.isEmpty { served[ProviderName.google.rawValue] = Set(googleApps.keys) }
        return served
    }

    /// The provider that serves `clientID`, when one does.
    public func provider(of clientID: String) -> String? {
        clientIDsByProvider.first { $0.value.contains(clientID) }?.key
    }

    /// The pooled HTTP clients for calls to providers, enough for the worker's concurrency over
    /// HTTP/2, trusting ``extraTrustRoots`` too.
    public func makeProviderHTTPClients() -> ProviderHTTPClients {
        ProviderHTTPClients(concurrency: worker.concurrency, extraTrustRoots: extraTrustRoots)
    }

    /// Seals with ``keyring`` and opens the SQL intake with ``intakeKeys``.
    public var sealer: CredentialSealer { CredentialSealer(keyring: keyring, intakeKeys: intakeKeys) }

    /// The database connection settings parsed from ``databaseURL``.
    public func databaseConfiguration() throws -> PostgresClient.Configuration {
        do throws(RevokerStoreError) {
            return try PostgresClient.Configuration(url: databaseURL)
        } catch {
            throw ConfigurationError("\(Variable.databaseURL) is not usable: \(error.message)")
        }
    }

    public init(
        databaseURL: String,
        appleBaseURL: String,
        keyring: CredentialKeyring,
        apps: [String: AppleAppSettings],
        worker: WorkerSettings = .init()
    ) {
        self.databaseURL = databaseURL
        self.appleBaseURL = appleBaseURL
        self.keyring = keyring
        self.apps = apps
        self.worker = worker
        self.appleNotifications = AppleNotificationVerifier.Settings(clientIDs: Set(apps.keys))
    }
}

extension RevokerConfiguration {
    /// The environment variables Revoker reads.
    public enum Variable {
        public static let configFile = "REVOKER_CONFIG"
        public static let databaseURL = "DATABASE_URL"
        public static let appleBaseURL = "REVOKER_APPLE_BASE_URL"
        public static let extraTrustRootsFile = "REVOKER_EXTRA_TRUST_ROOTS_FILE"
        public static let sealingKeys = "REVOKER_SEALING_KEYS"
        public static let sealingKeysFile = "REVOKER_SEALING_KEYS_FILE"
        public static let intakeKeysFile = "REVOKER_INTAKE_KEYS_FILE"
        public static let clientID = "APPLE_CLIENT_ID"
        public static let teamID = "APPLE_TEAM_ID"
        public static let keyID = "APPLE_KEY_ID"
        public static let privateKeyFile = "APPLE_PRIVATE_KEY_FILE"
        public static let privateKey = "APPLE_PRIVATE_KEY"
        public static let redirectURI = "APPLE_REDIRECT_URI"
        public static let httpHost = "REVOKER_HTTP_HOST"
        public static let httpPort = "REVOKER_HTTP_PORT"
        public static let auditSigningKeyFile = "REVOKER_AUDIT_SIGNING_KEY_FILE"
        public static let auditWitnessPath = "REVOKER_AUDIT_WITNESS_PATH"
        public static let googleClientID = "GOOGLE_CLIENT_ID"
        public static let googleClientSecretFile = "GOOGLE_CLIENT_SECRET_FILE"
        public static let googleAudiences = "GOOGLE_AUDIENCES"
        public static let googleRedirectURI = "GOOGLE_REDIRECT_URI"
        public static let googleOAuthBaseURL = "REVOKER_GOOGLE_OAUTH_BASE_URL"
        public static let googleCertsURL = "REVOKER_GOOGLE_CERTS_URL"
        public static let googleRISCConfigurationURL = "REVOKER_GOOGLE_RISC_CONFIGURATION_URL"
    }

    /// What a command needs from the configuration.
    public struct Needs: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let database = Needs(rawValue: 1)
        public static let keyring = Needs(rawValue: 2)
        public static let apps = Needs(rawValue: 4)
        public static let all: Needs = [.database, .keyring, .apps]
    }

    /// Loads the configuration from `file` (or `$REVOKER_CONFIG`) and the environment.
    /// Only what `needs` names must be present; everything present is checked. With `strict`,
    /// what would be a warning (a key file others may read) is an error.
    public static func load(
        file: String?,
        environment: [String: String],
        needs: Needs = .all,
        strict: Bool = false
    ) throws -> RevokerConfiguration {
        var secretFiles = SecretFiles()
        let path = file ?? environment[Variable.configFile].flatMap { $0.isEmpty ? nil : $0 }
        let document = try path.map(ConfigurationFile.read) ?? ConfigurationFile()
        let source = path.map { "the configuration file '\($0)'" }

        let databaseURL = environment[Variable.databaseURL].flatMap { $0.isEmpty ? nil : $0 } ?? document.databaseURL ?? ""
        if needs.contains(.database) {
            guard !databaseURL.isEmpty else {
                throw ConfigurationError(
                    "No database: set \(Variable.databaseURL) (postgres://user:password@host:5432/database) or \"database_url\" in the configuration file."
                )
            }
            do throws(RevokerStoreError) {
                _ = try PostgresClient.Configuration(url: databaseURL)
            } catch {
                throw ConfigurationError("\(Variable.databaseURL) is not usable: \(error.message)")
            }
        }

        let appleBaseURL =
            environment[Variable.appleBaseURL].flatMap { $0.isEmpty ? nil : $0 } ?? document.appleBaseURL ?? AppleClient.Configuration.appleBaseURL
        guard let url = URL(string: appleBaseURL), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ConfigurationError(
                "The Apple base URL '\(appleBaseURL.prefix(200))' (\(Variable.appleBaseURL) or \"apple_base_url\") is not an http(s) URL."
            )
        }

        let extraTrustRootsFile = environment[Variable.extraTrustRootsFile].flatMap { $0.isEmpty ? nil : $0 } ?? document.extraTrustRootsFile
        let extraTrustRoots = try extraTrustRootsFile.map(loadTrustRoots) ?? []

        let keyring = try loadKeyring(environment: environment, document: document, required: needs.contains(.keyring), secretFiles: &secretFiles)
        let intakeKeysFile = environment[Variable.intakeKeysFile].flatMap { $0.isEmpty ? nil : $0 } ?? document.intakeKeysFile
        let intakeKeys = try intakeKeysFile.map(loadIntakeKeys) ?? []
        if let intakeKeysFile { secretFiles.check(intakeKeysFile, holding: "the intake keys") }

        var apps: [String: AppleAppSettings] = [:]
        for (index, entry) in document.apps.enumerated() {
            let app = try entry.load(where: "app \(index + 1) (\(entry.clientID ?? "no client_id")) in \(source ?? "the configuration file")")
            if let path = entry.privateKeyFile { secretFiles.check(path, holding: "the Apple key of \(app.apple.clientID)") }
            guard apps[app.apple.clientID] == nil else {
                throw ConfigurationError("The client_id '\(app.apple.clientID)' appears twice in \(source ?? "the configuration file").")
            }
            apps[app.apple.clientID] = app
        }
        if let path = environment[Variable.privateKeyFile], !path.isEmpty { secretFiles.check(path, holding: "the Apple key") }
        if let app = try environmentApp(environment) {
            apps[app.apple.clientID] = app
        }
        let google = try loadGoogle(
            environment: environment,
            entry: document.google,
            place: source ?? "the configuration file",
            secretFiles: &secretFiles
        )
        if let shared = google.apps.keys.sorted().first(where: { apps[$0] != nil }) {
            throw ConfigurationError(
                "The client_id '\(shared)' is configured for Apple and for Google; a client_id belongs to one provider, as requests name it."
            )
        }
        if needs.contains(.apps), apps.isEmpty, google.apps.isEmpty {
            throw ConfigurationError(
                "No apps are configured: set \(Variable.clientID), \(Variable.teamID), \(Variable.keyID) and \(Variable.privateKeyFile) (or \(Variable.googleClientID) and \(Variable.googleClientSecretFile)), or list them under \"apps\" (or \"google\": {\"apps\"}) in a configuration file (--config or \(Variable.configFile))."
            )
        }
        var configuration = RevokerConfiguration(
            databaseURL: databaseURL,
            appleBaseURL: appleBaseURL,
            keyring: try keyring ?? CredentialKeyring(parsing: CredentialKeyring.generateEntry(keyID: "ephemeral")),
            apps: apps,
            worker: try document.worker?.settings(source: source ?? "the configuration file") ?? .init()
        )
        let rates =
            document.apps.enumerated().map { ("apps[\($0.offset)]", $0.element.clientID, $0.element.maxRequestsPerSecond) }
            + (document.google?.apps ?? []).enumerated().map { ("google.apps[\($0.offset)]", $0.element.clientID, $0.element.maxRequestsPerSecond) }
        for (entry, clientID, rate) in rates {
            guard let clientID, let rate else { continue }
            configuration.worker.appRequestsPerSecond[clientID] = try ConfigurationFile.inRange(
                rate,
                "\(entry).max_requests_per_second",
                ConfigurationFile.requestsPerSecond,
                source: source ?? "the configuration file"
            )
        }
        configuration.extraTrustRoots = extraTrustRoots
        configuration.extraTrustRootsFile = extraTrustRootsFile
        configuration.googleApps = google.apps
        configuration.google = google.client
        configuration.google.timeout = configuration.worker.providerTimeout
        configuration.http = try document.http?.settings(source: source ?? "the configuration file") ?? .init()
        // Received unless the file says `"enabled": false`.
        configuration.appleNotifications =
            try document.appleNotifications.map { try $0.settings(clientIDs: Set(apps.keys), source: source ?? "the configuration file") }
            ?? AppleNotificationVerifier.Settings(clientIDs: Set(apps.keys))
        for key in configuration.http.apiKeys {
            if let unknown = key.clientIDs?.sorted().first(where: { configuration.provider(of: $0) == nil }) {
                throw ConfigurationError(
                    "The API key '\(key.name)' in \(source ?? "the configuration file") names client_id '\(unknown.prefix(255))', which no configured app has."
                )
            }
        }
        if let host = environment[Variable.httpHost], !host.isEmpty { configuration.http.host = host }
        if let text = environment[Variable.httpPort], !text.isEmpty {
            guard let port = Int(text), (0...65_535).contains(port) else {
                throw ConfigurationError("\(Variable.httpPort) must be a port number between 0 (any free port) and 65535.")
            }
            configuration.http.port = port
        }
        let place = source ?? "the configuration file"
        for (index, entry) in document.webhooks.enumerated() {
            let endpoint = try entry.load(
                where: "webhooks[\(index)] in \(place)",
                apps: Set(apps.keys).union(google.apps.keys),
                secretFiles: &secretFiles
            )
            guard !configuration.webhooks.contains(where: { $0.name == endpoint.name }) else {
                throw ConfigurationError("webhooks[\(index)] in \(place): the name '\(endpoint.name)' is used twice.")
            }
            configuration.webhooks.append(endpoint)
        }
        configuration.webhookDelivery = try document.webhookDelivery?.settings(source: place) ?? .init()
        configuration.audit = try loadAudit(environment: environment, entry: document.audit, place: place, secretFiles: &secretFiles)
        configuration.intakeKeys = intakeKeys
        configuration.warnings = secretFiles.warnings
        if strict, !secretFiles.warnings.isEmpty {
            throw ConfigurationError(secretFiles.warnings.joined(separator: " ") + " (--strict refuses this)")
        }
        return configuration
    }

    private static func loadAudit(
        environment: [String: String],
        entry: ConfigurationFile.AuditEntry?,
        place: String,
        secretFiles: inout SecretFiles
    ) throws -> AuditSettings {
        var settings = AuditSettings()
        if let path = environment[Variable.auditSigningKeyFile].flatMap({ $0.isEmpty ? nil : $0 }) ?? entry?.signingKeyFile {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw ConfigurationError(
                    "The audit signing key file '\(path)' cannot be read (\(Variable.auditSigningKeyFile) or \"audit.signing_key_file\")."
                )
            }
            do {
                settings.signingKey = try AuditSigningKey(pemRepresentation: text)
            } catch {
                throw ConfigurationError("The audit signing key file '\(path)': \(error); `revoker keygen --audit` writes one.")
            }
            secretFiles.check(path, holding: "the audit signing key")
        }
        for path in entry?.publicKeyFiles ?? [] {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw ConfigurationError("The audit public key file '\(path)' (audit.public_key_files in \(place)) cannot be read.")
            }
            do {
                settings.previousKeys.append(try AuditPublicKey(pemRepresentation: text))
            } catch {
                throw ConfigurationError("The audit public key file '\(path)' (audit.public_key_files in \(place)): \(error).")
            }
        }
        if let interval = try ConfigurationFile.seconds(
            entry?.checkpointIntervalSeconds,
            "audit.checkpoint_interval_seconds",
            1...3600,
            source: place
        ) {
            settings.checkpointInterval = interval
        }
        if let path = environment[Variable.auditWitnessPath].flatMap({ $0.isEmpty ? nil : $0 }) ?? entry?.witnessPath {
            // It must be somewhere the service can write: a directory that exists, or a file in one.
            var isDirectory: ObjCBool = false
            let parent = (path as NSString).deletingLastPathComponent
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let writable = FileManager.default.isWritableFile(atPath: exists ? path : (parent.isEmpty ? "." : parent))
            guard writable else {
                throw ConfigurationError(
                    "The audit witness '\(path)' (\(Variable.auditWitnessPath) or \"audit.witness_path\") cannot be written: "
                        + "name a file in a directory the service may write to, or such a directory."
                )
            }
            settings.witnessPath = path
        }
        return settings
    }

    /// Reads the PEM certificates of authorities to trust beside the system's.
    private static func loadTrustRoots(_ path: String) throws -> [NIOSSLCertificate] {
        let setting = "(\(Variable.extraTrustRootsFile) or \"extra_trust_roots_file\")"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("The extra trust roots file '\(path)' \(setting) cannot be read.")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw ConfigurationError("The extra trust roots file '\(path)' \(setting) holds no readable PEM certificate.")
        }
        guard !certificates.isEmpty else {
            throw ConfigurationError("The extra trust roots file '\(path)' \(setting) holds no PEM certificate.")
        }
        return certificates
    }

    /// Reads one or more PEM RSA private keys; the last is the current one, as with sealing keys.
    private static func loadIntakeKeys(_ path: String) throws -> [IntakeKey] {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("The intake key file '\(path)' cannot be read (\(Variable.intakeKeysFile) or \"intake_keys_file\").")
        }
        let blocks = text.components(separatedBy: "-----BEGIN ").dropFirst().map { "-----BEGIN " + $0 }
        guard !blocks.isEmpty else {
            throw ConfigurationError("The intake key file '\(path)' holds no PEM key; `revoker keygen --intake` writes one.")
        }
        var keys: [IntakeKey] = []
        for (index, block) in blocks.enumerated() {
            do {
                keys.append(try IntakeKey(pemRepresentation: block.trimmingCharacters(in: .whitespacesAndNewlines)))
            } catch {
                throw ConfigurationError("Key \(index + 1) in the intake key file '\(path)' is unusable: \(error).")
            }
        }
        return keys
    }

    private static func loadKeyring(
        environment: [String: String],
        document: ConfigurationFile,
        required: Bool,
        secretFiles: inout SecretFiles
    ) throws -> CredentialKeyring? {
        let text: String
        let source: String
        if let value = environment[Variable.sealingKeys], !value.isEmpty {
            text = value
            source = Variable.sealingKeys
        } else if let path = environment[Variable.sealingKeysFile].flatMap({ $0.isEmpty ? nil : $0 }) ?? document.sealingKeysFile {
            guard let data = FileManager.default.contents(atPath: path), let content = String(data: data, encoding: .utf8) else {
                throw ConfigurationError("The sealing key file '\(path)' cannot be read (\(Variable.sealingKeysFile) or \"sealing_keys_file\").")
            }
            text = content
            source = "the sealing key file '\(path)'"
            secretFiles.check(path, holding: "the sealing keys")
        } else if required {
            throw ConfigurationError(
                "No credential sealing key: set \(Variable.sealingKeysFile) to a file (or \(Variable.sealingKeys)) holding lines of keyID=base64 32-byte key; `revoker keygen` prints one."
            )
        } else {
            return nil
        }
        do {
            return try CredentialKeyring(parsing: text)
        } catch {
            throw ConfigurationError("The credential sealing keys in \(source) are unusable: \(error.message)")
        }
    }

    private static func environmentApp(_ environment: [String: String]) throws -> AppleAppSettings? {
        let value = { (name: String) in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let names = [Variable.clientID, Variable.teamID, Variable.keyID]
        let present = names.filter { value($0) != nil }
        let keyGiven = value(Variable.privateKeyFile) != nil || value(Variable.privateKey) != nil
        guard !present.isEmpty || keyGiven else { return nil }
        let missing = names.filter { value($0) == nil } + (keyGiven ? [] : ["\(Variable.privateKeyFile) (or \(Variable.privateKey))"])
        guard missing.isEmpty, let clientID = value(Variable.clientID), let teamID = value(Variable.teamID), let keyID = value(Variable.keyID) else {
            throw ConfigurationError("The app in the environment is incomplete: set \(missing.joined(separator: ", ")).")
        }
        do {
            let key =
                if let path = value(Variable.privateKeyFile) {
                    try AppleSigningKey.load(contentsOfFile: path)
                } else {
                    try AppleSigningKey(pem: value(Variable.privateKey) ?? "", source: "environment variable \(Variable.privateKey)")
                }
            let apple = try AppleApp(clientID: clientID, teamID: teamID, keyID: keyID, signingKey: key)
            return AppleAppSettings(apple: apple, defaultRedirectURI: value(Variable.redirectURI))
        } catch {
            throw ConfigurationError("\(error.message) (set through \(Variable.clientID), \(Variable.teamID), \(Variable.keyID)).")
        }
    }
}
