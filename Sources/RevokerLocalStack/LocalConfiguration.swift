import AppleSignIn
import AppleSignInSandbox
import Crypto
import Foundation
import GoogleSignInSandbox
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

/// A Google OAuth client's id and secret file, as an operator lays them out.
public struct LocalGoogleAppFiles: Sendable {
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
    public let googleApps: [LocalGoogleAppFiles]

    /// Writes keys for `clientIDs`, a sealing keyring and a configuration file pointing at them;
    /// `settings` are further top-level settings (`webhooks`, …).
    public init(
        clientIDs: [String],
        googleClientIDs: [String] = [],
        worker: [String: any Sendable] = [:],
        http: [String: any Sendable] = [:],
        settings: [String: any Sendable] = [:]
    ) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        apps = try clientIDs.map { try LocalAppFiles(clientID: $0, directory: directory) }
        googleApps = try googleClientIDs.map { try LocalGoogleAppFiles(clientID: $0, directory: directory) }
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
        if !googleApps.isEmpty { document["google"] = ["apps": googleApps.map(\.configurationEntry)] }
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
    /// sandboxes (Google's at `appleBaseURL` + `/google` unless given); `trustRootsFile` is the
    /// sandbox's throw-away authority when it serves HTTPS.
    public func environment(
        databaseURL: String,
        appleBaseURL: String,
        googleBaseURL: String? = nil,
        trustRootsFile: String? = nil
    ) -> [String: String] {
        let google = googleBaseURL ?? appleBaseURL + "/google"
        var environment = [
            "REVOKER_CONFIG": configFile, "DATABASE_URL": databaseURL, "REVOKER_APPLE_BASE_URL": appleBaseURL,
            "REVOKER_GOOGLE_OAUTH_BASE_URL": google, "REVOKER_GOOGLE_CERTS_URL": google + "/oauth2/v3/certs",
            "REVOKER_GOOGLE_RISC_CONFIGURATION_URL": google + "/.well-known/risc-configuration",
        ]
        if let trustRootsFile { environment["REVOKER_EXTRA_TRUST_ROOTS_FILE"] = trustRootsFile }
        return environment
    }

    /// The environment for a `revoker` process using this configuration, the database and `sandbox`.
    public func environment(databaseURL: String, sandbox: RunningSandbox) -> [String: String] {
        environment(
            databaseURL: databaseURL,
            appleBaseURL: sandbox.baseURL,
            googleBaseURL: sandbox.googleBaseURL,
            trustRootsFile: sandbox.trustRootsFile
        )
    }

    /// Registers every app's public key, and every Google client's secret, with the sandboxes.
    public func register(with sandbox: RunningSandbox) async throws {
        for app in apps {
            try await sandbox.admin.register(.init(clientID: app.clientID, teamID: app.teamID, keyID: app.keyID, publicKeyPEM: app.publicKeyPEM))
        }
        for app in googleApps {
            try await sandbox.google.register(clientID: app.clientID, clientSecret: app.clientSecret)
        }
    }

    /// The secrets in these files, line by line, to search captured output for.
    public var secretTexts: [String] {
        apps.flatMap { $0.privateKeyPEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init) } + googleApps.map(\.clientSecret)
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
