import AppleSignIn
import AppleSignInSandbox
import Crypto
import Foundation
import RevokerEvidence
import RevokerStore

/// An app's key and identifiers written to a temporary directory, as an operator would lay them out.
public struct LocalAppFiles: Sendable {
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
    public func configurationEntry(redirectURI: String? = nil) -> [String: String] {
        var entry = ["client_id": clientID, "team_id": teamID, "key_id": keyID, "private_key_file": privateKeyFile]
        if let redirectURI { entry["redirect_uri"] = redirectURI }
        return entry
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
    public let apps: [LocalAppFiles]

    /// Writes keys for `clientIDs`, a sealing keyring and a configuration file pointing at them;
    /// `settings` are further top-level settings (`webhooks`, …).
    public init(
        clientIDs: [String],
        worker: [String: any Sendable] = [:],
        http: [String: any Sendable] = [:],
        settings: [String: any Sendable] = [:]
    ) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        apps = try clientIDs.map { try LocalAppFiles(clientID: $0, directory: directory) }
        sealingKeysFile = directory.appendingPathComponent("sealing-keys").path
        try writeSecret(try CredentialKeyring.generateEntry(keyID: "k1") + "\n", to: sealingKeysFile)
        intakeKeysFile = directory.appendingPathComponent("intake-keys.pem").path
        try writeSecret(try Self.intakeKey().pemRepresentation + "\n", to: intakeKeysFile)
        auditSigningKeyFile = directory.appendingPathComponent("audit-signing-key.pem").path
        try writeSecret(AuditSigningKey().pemRepresentation + "\n", to: auditSigningKeyFile)
        configFile = directory.appendingPathComponent("revoker.json").path
        var document: [String: Any] = [
            "sealing_keys_file": sealingKeysFile, "intake_keys_file": intakeKeysFile, "apps": apps.map { $0.configurationEntry() },
            "audit": ["signing_key_file": auditSigningKeyFile],
        ]
        if !worker.isEmpty { document["worker"] = worker }
        if !http.isEmpty { document["http"] = http }
        for (key, value) in settings { document[key] = value }
        try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: configFile))
    }

    /// One RSA key for every local configuration of a process: generating one per test stack
    /// would cost more than the tests themselves.
    static func intakeKey() throws -> IntakeKey { try sharedIntakeKey.get() }
    private static let sharedIntakeKey = Result { try IntakeKey.generate() }

    /// The environment for a `revoker` process using this configuration, the database and the sandbox.
    public func environment(databaseURL: String, appleBaseURL: String) -> [String: String] {
        ["REVOKER_CONFIG": configFile, "DATABASE_URL": databaseURL, "REVOKER_APPLE_BASE_URL": appleBaseURL]
    }

    /// Registers every app's public key with the sandbox.
    public func register(with sandbox: RunningSandbox) async throws {
        for app in apps {
            try await sandbox.admin.register(.init(clientID: app.clientID, teamID: app.teamID, keyID: app.keyID, publicKeyPEM: app.publicKeyPEM))
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
func writeSecret(_ text: String, to path: String) throws {
    guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
    }
}
