import AsyncHTTPClient
import Configuration
import Foundation
import Logging
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
/// file's settings. Each registered provider reads its own part (``plugins``). Secrets are read
/// from files or the environment, never from the command line.
public struct RevokerConfiguration: Sendable {
    /// `postgres://user:password@host:port/database`.
    public var databaseURL: String
    /// Authorities trusted beside the system's for calls to providers, and the file they came
    /// from: a sandbox's throw-away authority, for tests only.
    public var extraTrustRoots: [NIOSSLCertificate] = []
    public var extraTrustRootsFile: String?
    /// Keys sealing credentials at rest (a throw-away key when the command needs none).
    public var keyring: CredentialKeyring
    /// Each registered provider with its settings, in ``plugins``' order.
    public var providers: [ConfiguredProvider] = []
    /// Worker tuning.
    public var worker: WorkerSettings
    /// The HTTP API.
    public var http: HTTPSettings = .init()
    /// Where the worker processes deliver events.
    public var webhooks: [WebhookEndpoint] = []
    /// How they deliver them.
    public var webhookDelivery = WebhookSettings()
    /// The audit trail's signing key and checkpoints.
    public var audit = AuditSettings()
    /// OpenTelemetry tracing; off unless configured.
    public var tracing = TracingSettings()
    /// The intake keys (RSA) of the SQL enqueue path: the first is published for
    /// `revoker.enqueue_revocation` to encrypt to (the last), all of them open what it wrote.
    public var intakeKeys: [IntakeKey] = []
    /// What is unsafe but usable, such as a key file others may read; `--strict` refuses it.
    public var warnings: [String] = []

    /// The client_ids each provider serves; a client_id belongs to one provider only.
    public var clientIDsByProvider: [String: Set<String>] {
        var served: [String: Set<String>] = [:]
        for provider in providers {
            // A provider without apps is not served (requests naming it are refused by provider),
            // but for the one a request names when it names none: its refusal is "no such app".
            let clientIDs = provider.settings.clientIDs
            if !clientIDs.isEmpty || provider.name.rawValue == NewRevocation.defaultProvider { served[provider.name.rawValue] = clientIDs }
        }
        return served
    }

    /// The provider that serves `clientID`, when one does.
    public func provider(of clientID: String) -> String? {
        clientIDsByProvider.first { $0.value.contains(clientID) }?.key
    }

    /// The settings of the provider whose settings are of type `type`.
    public func settings<Settings: ProviderSettings>(_ type: Settings.Type) -> Settings? {
        providers.lazy.compactMap { $0.settings as? Settings }.first
    }

    /// Changes the settings of `plugin`'s provider (a test's configuration without an app, say).
    public mutating func update<Plugin: ProviderPlugin>(_ plugin: Plugin.Type, _ change: (inout Plugin.Settings) -> Void) {
        guard let index = providers.firstIndex(where: { $0.name == plugin.name }), var settings = providers[index].settings as? Plugin.Settings
        else { return }
        change(&settings)
        providers[index] = ConfiguredProvider(plugin, settings: settings)
    }

    /// The apps the SQL functions (`revoker.enqueue_revocation`, `revoker.register_grant`) accept,
    /// by provider: every configured one (client_ids are unique across providers, so the app
    /// names its provider).
    public var sqlApps: [String: Set<String>] { clientIDsByProvider.filter { !$0.value.isEmpty } }

    /// The pooled HTTP clients for calls to providers, enough for the worker's concurrency over
    /// HTTP/2, trusting ``extraTrustRoots`` too.
    public func makeProviderHTTPClients() -> ProviderHTTPClients {
        ProviderHTTPClients(concurrency: worker.concurrency, extraTrustRoots: extraTrustRoots)
    }

    /// What every provider is made with: the worker's timeout and client secret lifetime.
    public func providerContext(logger: Logger) -> ProviderContext {
        ProviderContext(timeout: worker.providerTimeout, clientSecretLifetime: worker.clientSecretLifetime, logger: logger)
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

    public init(databaseURL: String, keyring: CredentialKeyring, providers: [ConfiguredProvider] = [], worker: WorkerSettings = .init()) {
        self.databaseURL = databaseURL
        self.keyring = keyring
        self.providers = providers
        self.worker = worker
    }
}

extension RevokerConfiguration {
    /// The environment variables Revoker reads beside the providers' (each plug-in's `variables`).
    public enum Variable {
        public static let configFile = "REVOKER_CONFIG"
        public static let databaseURL = "DATABASE_URL"
        public static let extraTrustRootsFile = "REVOKER_EXTRA_TRUST_ROOTS_FILE"
        public static let sealingKeys = "REVOKER_SEALING_KEYS"
        public static let sealingKeysFile = "REVOKER_SEALING_KEYS_FILE"
        public static let intakeKeysFile = "REVOKER_INTAKE_KEYS_FILE"
        public static let httpHost = "REVOKER_HTTP_HOST"
        public static let httpPort = "REVOKER_HTTP_PORT"
        public static let auditSigningKeyFile = "REVOKER_AUDIT_SIGNING_KEY_FILE"
        public static let auditWitnessPath = "REVOKER_AUDIT_WITNESS_PATH"
    }

    /// Every environment variable Revoker reads: ``Variable``'s and each provider's.
    public static var variableNames: [String] {
        [Variable.configFile] + (variables + plugins.flatMap(\.variables)).map(\.name)
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

    /// Loads the configuration from `file` (or `$REVOKER_CONFIG`) and the environment, which
    /// wins over the file. Only what `needs` names must be present; everything present is
    /// checked. With `strict`, what would be a warning (a key file others may read) is an error.
    /// `accessReporter` hears every read, secrets marked as such (swift-configuration's
    /// `AccessLogger` redacts them).
    public static func load(
        file: String?,
        environment: [String: String],
        needs: Needs = .all,
        strict: Bool = false,
        accessReporter: (any AccessReporter)? = nil
    ) throws -> RevokerConfiguration {
        let path = file ?? environment[Variable.configFile].flatMap { $0.isEmpty ? nil : $0 }
        var shape = fileKeys
        for plugin in plugins { shape.merge(plugin.fileKeys) { own, _ in own } }
        let fileProvider = try path.map { try SettingsProviders.file(at: $0, shape: shape) } ?? InMemoryProvider(values: [:])
        let variables = Self.variables + plugins.flatMap(\.variables)
        let (environmentProvider, setBy) = try SettingsProviders.environment(environment, variables: variables)
        let source = SettingsSource(
            reader: ConfigReader(providers: [environmentProvider, fileProvider], accessReporter: accessReporter),
            place: path.map { "the configuration file '\($0)'" } ?? "the configuration file",
            setByEnvironment: setBy
        )
        let reader = source.reader
        var secretFiles = SecretFiles()

        let databaseURL = reader.string(forKey: "database_url", isSecret: true) ?? ""
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
        let extraTrustRootsFile = reader.string(forKey: "extra_trust_roots_file")
        let keyring = try loadKeyring(source, required: needs.contains(.keyring), secretFiles: &secretFiles)
        let intakeKeysFile = reader.string(forKey: "intake_keys_file")
        let intakeKeys = try intakeKeysFile.map(loadIntakeKeys) ?? []
        if let intakeKeysFile { secretFiles.check(intakeKeysFile, holding: "the intake keys") }

        var configuration = RevokerConfiguration(
            databaseURL: databaseURL,
            keyring: try keyring ?? CredentialKeyring(parsing: CredentialKeyring.generateEntry(keyID: "ephemeral")),
            worker: try WorkerSettings(reading: source.scoped(to: "worker"))
        )
        // `custody`: the worker validates held grants; a day at least, as Apple asks.
        configuration.worker.grantValidationInterval = try source.scoped(to: "custody").double("validate_every_days", in: 1...3650)
            .map { .seconds($0 * 86_400) }
        configuration.extraTrustRoots = try extraTrustRootsFile.map(loadTrustRoots) ?? []
        configuration.extraTrustRootsFile = extraTrustRootsFile
        for plugin in plugins {
            let provider = try plugin.read(source, &secretFiles)
            for other in configuration.providers {
                if let shared = other.settings.clientIDs.intersection(provider.settings.clientIDs).sorted().first {
                    let names = [other.name, provider.name].map { $0.rawValue.prefix(1).uppercased() + $0.rawValue.dropFirst() }
                    throw ConfigurationError(
                        "The client_id '\(shared)' is configured for \(names[0]) and for \(names[1]); a client_id belongs to one provider, as requests name it."
                    )
                }
            }
            configuration.providers.append(provider)
            configuration.worker.appRequestsPerSecond.merge(provider.settings.requestsPerSecond) { $1 }
        }
        if needs.contains(.apps), configuration.providers.allSatisfy({ $0.settings.clientIDs.isEmpty }) {
            throw ConfigurationError(
                "No apps are configured: \(plugins.map(\.howToAddApps).joined(separator: "; or ")), in a configuration file (--config or \(Variable.configFile)) or the environment."
            )
        }
        configuration.http = try HTTPSettings(reading: source.scoped(to: "http"))
        for key in configuration.http.apiKeys {
            if let unknown = key.clientIDs?.sorted().first(where: { configuration.provider(of: $0) == nil }) {
                throw ConfigurationError(
                    "The API key '\(key.name)' in \(source.place) names client_id '\(unknown.prefix(255))', which no configured app has."
                )
            }
        }
        let clientIDs = configuration.providers.reduce(into: Set<String>()) { $0.formUnion($1.settings.clientIDs) }
        for entry in source.entries("webhooks") {
            let endpoint = try WebhookEndpoint(reading: entry, apps: clientIDs, secretFiles: &secretFiles)
            guard !configuration.webhooks.contains(where: { $0.name == endpoint.name }) else {
                throw ConfigurationError("\(entry.name) in \(source.place): the name '\(endpoint.name)' is used twice.")
            }
            configuration.webhooks.append(endpoint)
        }
        configuration.webhookDelivery = try WebhookSettings(reading: source.scoped(to: "webhook_delivery"))
        configuration.audit = try loadAudit(source.scoped(to: "audit"), secretFiles: &secretFiles)
        configuration.tracing = try TracingSettings(reading: source.scoped(to: "tracing"), environment: environment)
        configuration.intakeKeys = intakeKeys
        configuration.warnings = secretFiles.warnings
        if strict, !secretFiles.warnings.isEmpty {
            throw ConfigurationError(secretFiles.warnings.joined(separator: " ") + " (--strict refuses this)")
        }
        return configuration
    }

    private static func loadAudit(_ source: SettingsSource, secretFiles: inout SecretFiles) throws -> AuditSettings {
        var settings = AuditSettings()
        if let path = source.reader.string(forKey: "signing_key_file") {
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
        for path in source.reader.stringArray(forKey: "public_key_files") ?? [] {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw ConfigurationError("The audit public key file '\(path)' (audit.public_key_files in \(source.place)) cannot be read.")
            }
            do {
                settings.previousKeys.append(try AuditPublicKey(pemRepresentation: text))
            } catch {
                throw ConfigurationError("The audit public key file '\(path)' (audit.public_key_files in \(source.place)): \(error).")
            }
        }
        settings.checkpointInterval = try source.seconds("checkpoint_interval_seconds", in: 1...3600) ?? settings.checkpointInterval
        if let path = source.reader.string(forKey: "witness_path") {
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

    private static func loadKeyring(_ source: SettingsSource, required: Bool, secretFiles: inout SecretFiles) throws -> CredentialKeyring? {
        let text: String
        let origin: String
        if let value = source.reader.string(forKey: "sealing_keys", isSecret: true) {
            text = value
            origin = Variable.sealingKeys
        } else if let path = source.reader.string(forKey: "sealing_keys_file") {
            guard let data = FileManager.default.contents(atPath: path), let content = String(data: data, encoding: .utf8) else {
                throw ConfigurationError("The sealing key file '\(path)' cannot be read (\(Variable.sealingKeysFile) or \"sealing_keys_file\").")
            }
            text = content
            origin = "the sealing key file '\(path)'"
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
            throw ConfigurationError("The credential sealing keys in \(origin) are unusable: \(error.message)")
        }
    }
}
