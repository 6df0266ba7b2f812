import AppleSignIn
import AppleSignInSandbox
import Crypto
import Foundation
import GoogleSignInSandbox
import RevokerEvidence
import RevokerProvider
import RevokerStore

/// An Apple app's key and identifiers written to a temporary directory, as an operator would lay them out.
public struct LocalAppFiles: LocalApp {
    public let clientID: String
    public let teamID: String
    public let keyID: String
    /// The `.p8` file.
    public let privateKeyFile: String
    /// The PEM text of the key (to search captured output for it).
    public let privateKeyPEM: String
    public let publicKeyPEM: String

    /// Generates a key and writes it to `directory`.
    public init(clientID: String, teamID: String = "TEAM000001", keyID: String = "KEY0000001", directory: URL) throws {
        let key = P256.Signing.PrivateKey()
        self.clientID = clientID
        self.teamID = teamID
        self.keyID = keyID
        privateKeyPEM = key.pemRepresentation
        publicKeyPEM = key.publicKey.pemRepresentation
        let file = directory.appendingPathComponent("AuthKey_\(keyID)_\(clientID).p8")
        try writeSecret(privateKeyPEM, to: file.path)
        privateKeyFile = file.path
    }

    /// The JSON object for the configuration file's `apps` list.
    public var configurationEntry: [String: String] {
        ["client_id": clientID, "team_id": teamID, "key_id": keyID, "private_key_file": privateKeyFile]
    }

    /// The key's lines.
    public var secretTexts: [String] {
        privateKeyPEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
    }

    /// Registers the public key with the Apple sandbox.
    public func register(with sandbox: RunningSandbox) async throws {
        try await sandbox.admin.register(.init(clientID: clientID, teamID: teamID, keyID: keyID, publicKeyPEM: publicKeyPEM))
    }
}

/// A Google OAuth client's id and secret file, as an operator lays them out.
public struct LocalGoogleAppFiles: LocalApp {
    public let clientID: String
    /// The secret (to register with the sandbox, and to search captured output for).
    public let clientSecret: String
    public let clientSecretFile: String

    /// Makes a secret and writes it to `directory`.
    public init(clientID: String, directory: URL) throws {
        self.clientID = clientID
        clientSecret = "GOCSPX-" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        clientSecretFile = directory.appendingPathComponent("google-client-secret-\(clientID)").path
        try writeSecret(clientSecret + "\n", to: clientSecretFile)
    }

    /// The JSON object for the configuration file's `google.apps` list.
    public var configurationEntry: [String: String] { ["client_id": clientID, "client_secret_file": clientSecretFile] }

    public var secretTexts: [String] { [clientSecret] }

    /// Registers the client and its secret with the Google sandbox.
    public func register(with sandbox: RunningSandbox) async throws {
        try await sandbox.google.register(clientID: clientID, clientSecret: clientSecret)
    }
}

/// A temporary directory holding a configuration file, keys and a sealing keyring.
public struct LocalConfiguration: Sendable {
    public let directory: URL
    public let configFile: String
    public let sealingKeysFile: String
    public let intakeKeysFile: String
    /// The Ed25519 key that signs the audit trail's checkpoints and receipts.
    public let auditSigningKeyFile: String
    /// Each provider's apps, in the order given.
    public let apps: [ProviderName: [any LocalApp]]

    /// Writes files for each provider's apps (`[.apple: ["com.example.app"]]`), a sealing
    /// keyring and a configuration file pointing at them; `settings` are further top-level
    /// settings (`webhooks`, …).
    public init(
        apps clientIDs: [ProviderName: [String]],
        worker: [String: any Sendable] = [:],
        http: [String: any Sendable] = [:],
        settings: [String: any Sendable] = [:]
    ) throws {
        precondition(clientIDs.keys.allSatisfy { name in LocalProvider.all.contains { $0.name == name } }, "a provider the local stack does not know")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        var apps: [ProviderName: [any LocalApp]] = [:]
        for provider in LocalProvider.all {
            apps[provider.name] = try clientIDs[provider.name, default: []].map { try provider.makeApp($0, directory) }
        }
        self.apps = apps
        sealingKeysFile = directory.appendingPathComponent("sealing-keys").path
        try writeSecret(try CredentialKeyring.generateEntry(keyID: "k1") + "\n", to: sealingKeysFile)
        intakeKeysFile = directory.appendingPathComponent("intake-keys.pem").path
        try writeSecret(try Self.intakeKey().pemRepresentation + "\n", to: intakeKeysFile)
        auditSigningKeyFile = directory.appendingPathComponent("audit-signing-key.pem").path
        try writeSecret(AuditSigningKey().pemRepresentation + "\n", to: auditSigningKeyFile)
        configFile = directory.appendingPathComponent("revoker.json").path
        var document: [String: Any] = [
            "sealing_keys_file": sealingKeysFile, "intake_keys_file": intakeKeysFile, "audit": ["signing_key_file": auditSigningKeyFile],
        ]
        for provider in LocalProvider.all {
            guard let entries = apps[provider.name]?.map(\.configurationEntry), !entries.isEmpty else { continue }
            document.insert(entries, at: provider.appsKey)
        }
        if !worker.isEmpty { document["worker"] = worker }
        if !http.isEmpty { document["http"] = http }
        for (key, value) in settings {
            // `audit` settings join the signing key rather than replace it.
            if key == "audit", let audit = value as? [String: any Sendable] {
                document[key] = audit.merging(["signing_key_file": auditSigningKeyFile]) { given, _ in given }
            } else {
                document[key] = value
            }
        }
        try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: configFile))
    }

    /// One RSA key for every local configuration of a process: generating one per test stack
    /// would cost more than the tests themselves.
    static func intakeKey() throws -> IntakeKey { try sharedIntakeKey.get() }
    private static let sharedIntakeKey = Result { try IntakeKey.generate() }

    /// The environment for a `revoker` process using this configuration, the database and the
    /// sandboxes served at `baseURL` (each provider's under its path); `trustRootsFile` is the
    /// sandboxes' throw-away authority when they serve HTTPS.
    public func environment(databaseURL: String, baseURL: String, trustRootsFile: String? = nil) -> [String: String] {
        var environment = ["REVOKER_CONFIG": configFile, "DATABASE_URL": databaseURL]
        for provider in LocalProvider.all { environment.merge(provider.environment(baseURL + provider.path)) { $1 } }
        if let trustRootsFile { environment["REVOKER_EXTRA_TRUST_ROOTS_FILE"] = trustRootsFile }
        return environment
    }

    /// The environment for a `revoker` process using this configuration, the database and `sandbox`.
    public func environment(databaseURL: String, sandbox: RunningSandbox) -> [String: String] {
        environment(databaseURL: databaseURL, baseURL: sandbox.baseURL, trustRootsFile: sandbox.trustRootsFile)
    }

    /// The client IDs of `provider`'s apps, in the order given.
    public func clientIDs(_ provider: ProviderName) -> [String] {
        apps[provider, default: []].map(\.clientID)
    }

    /// The apps of one kind, in the order given: `files.apps(LocalAppFiles.self)[0].teamID`.
    public func apps<App: LocalApp>(_ type: App.Type) -> [App] {
        LocalProvider.all.flatMap { apps[$0.name, default: []] }.compactMap { $0 as? App }
    }

    /// Registers every app with its provider's sandbox.
    public func register(with sandbox: RunningSandbox) async throws {
        for provider in LocalProvider.all {
            for app in apps[provider.name, default: []] { try await app.register(with: sandbox) }
        }
    }

    /// The secrets in these files, line by line, to search captured output for.
    public var secretTexts: [String] {
        LocalProvider.all.flatMap { apps[$0.name, default: []] }.flatMap(\.secretTexts)
    }
}

extension [String: Any] {
    /// Sets `value` at a path of keys, making the objects on the way.
    mutating func insert(_ value: Any, at path: [String]) {
        guard let key = path.first else { return }
        if path.count == 1 {
            self[key] = value
        } else {
            var object = self[key] as? [String: Any] ?? [:]
            object.insert(value, at: Array(path.dropFirst()))
            self[key] = object
        }
    }
}

extension LocalAppFiles {
    /// The public half of a key nobody configured, to make Apple reject an app's secrets.
    public static func otherPublicKeyPEM() -> String {
        P256.Signing.PrivateKey().publicKey.pemRepresentation
    }
}

/// Writes a secret readable by its owner only, as `--strict` expects.
public func writeSecret(_ text: String, to path: String) throws {
    guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
    }
}
