import AppleSignInSandbox
import FacebookLogin
import FacebookLoginSandbox
import Foundation
import GoogleSignInSandbox
import ProviderSandbox
import RevokerEvidence
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

@Suite("revoker check and keygen")
struct CheckKeygenCommandTests {
    static func apps(_ report: [String: Any]) throws -> [String: [String: Any]] {
        let list = try #require(report["apps"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: list.compactMap { app in (app["client_id"] as? String).map { ($0, app) } })
    }

    /// Expects no private key, client secret or signature in the output.
    static func expectNoKeyMaterial(
        _ result: RevokerProcess.Result,
        _ configuration: LocalConfiguration,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let lines = configuration.apps(LocalAppFiles.self).flatMap {
            $0.privateKeyPEM.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("-----") }
        }
        for line in lines {
            #expect(!result.stdout.contains(line) && !result.stderr.contains(line), "private key material printed", sourceLocation: sourceLocation)
        }
        // A JWS starts with the base64url of `{"`: no header, claims or whole token in base64.
        #expect(!result.stdout.contains("eyJ") && !result.stderr.contains("eyJ"), "an encoded JWS was printed", sourceLocation: sourceLocation)
        #expect(!result.stdout.contains("PRIVATE KEY") && !result.stderr.contains("PRIVATE KEY"), sourceLocation: sourceLocation)
    }

    @Test("check prints each app's decoded client secret header and claims, never the signature or key")
    func offline() async throws {
        let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app", "com.example.web"]])
        defer { try? FileManager.default.removeItem(at: configuration.directory) }
        let result = try await RevokerProcess.run(["check", "--config", configuration.configFile], environment: [:])
        #expect(result.status == 0, "\(result.stderr)")
        Self.expectNoKeyMaterial(result, configuration)
        let report = try #require(try parseJSON(result.stdout) as? [String: Any])
        #expect(report["ok"] as? Bool == true)
        #expect((report["database"] as? [String: Any])?["configured"] as? Bool == false)
        let apps = try Self.apps(report)
        #expect(apps.count == 2)
        for clientID in ["com.example.app", "com.example.web"] {
            let secret = try #require(apps[clientID]?["client_secret"] as? [String: Any])
            let header = try #require(secret["header"] as? [String: Any])
            let claims = try #require(secret["claims"] as? [String: Any])
            #expect(header["alg"] as? String == "ES256")
            #expect(header["kid"] as? String == "KEY0000001")
            #expect(claims["iss"] as? String == "TEAM000001")
            #expect(claims["sub"] as? String == clientID)
            #expect(claims["aud"] as? String == "https://appleid.apple.com" || (claims["aud"] as? [String]) == ["https://appleid.apple.com"])
            let issuedAt = try #require(claims["iat"] as? Double)
            let expires = try #require(claims["exp"] as? Double)
            #expect(expires - issuedAt == 300)
            #expect(abs(issuedAt - Date().timeIntervalSince1970) < 600)
            #expect(secret["signature"] == nil)
        }
        #expect(result.stderr.contains("check passed"))
    }

    @Test("a key file other users may read is a warning, and --strict refuses it")
    func keyFilesOthersMayRead() async throws {
        let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"]])
        defer { try? FileManager.default.removeItem(at: configuration.directory) }
        let files = [configuration.sealingKeysFile, configuration.intakeKeysFile, configuration.apps(LocalAppFiles.self)[0].privateKeyFile]
        let strict = try await RevokerProcess.run(["check", "--strict", "--config", configuration.configFile], environment: [:])
        #expect(strict.status == 0, "owner-only files pass --strict: \(strict.stderr)")
        for file in files { try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file) }

        let warned = try await RevokerProcess.run(["check", "--config", configuration.configFile], environment: [:])
        #expect(warned.status == 0, "\(warned.stderr)")
        for file in files {
            #expect(warned.stderr.contains("warning: The file '\(file)'"), "\(warned.stderr)")
        }
        let refused = try await RevokerProcess.run(["check", "--strict", "--config", configuration.configFile], environment: [:])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains(configuration.sealingKeysFile) && refused.stderr.contains("--strict"), "\(refused.stderr)")
        Self.expectNoKeyMaterial(refused, configuration)
    }

    @Test("check --online passes for registered apps and fails with exit 1 for an app Apple does not know")
    func online() async throws {
        try await RunningSandbox.with { sandbox in
            let configuration = try LocalConfiguration(apps: [.apple: ["com.example.known", "com.example.unknown"]])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let known = try #require(configuration.apps(LocalAppFiles.self).first { $0.clientID == "com.example.known" })
            try await sandbox.admin.register(
                .init(clientID: known.clientID, teamID: known.teamID, keyID: known.keyID, publicKeyPEM: known.publicKeyPEM)
            )
            let environment = [
                "REVOKER_CONFIG": configuration.configFile, "REVOKER_APPLE_BASE_URL": sandbox.baseURL,
                "REVOKER_EXTRA_TRUST_ROOTS_FILE": sandbox.trustRootsFile ?? "",
            ]

            let mixed = try await RevokerProcess.run(["check", "--online"], environment: environment)
            #expect(mixed.status == 1, "\(mixed.stderr)")
            Self.expectNoKeyMaterial(mixed, configuration)
            let report = try #require(try parseJSON(mixed.stdout) as? [String: Any])
            #expect(report["ok"] as? Bool == false)
            let apps = try Self.apps(report)
            #expect((apps["com.example.known"]?["online"] as? [String: Any])?["result"] as? String == "accepted")
            let unknown = try #require(apps["com.example.unknown"]?["online"] as? [String: Any])
            #expect(unknown["result"] as? String == "failed")
            #expect((unknown["detail"] as? String)?.contains("invalid_client") == true)
            #expect(mixed.stderr.contains("com.example.unknown"))
            #expect(!mixed.stderr.contains("app com.example.known:"))

            let single = try LocalConfiguration(apps: [.apple: ["com.example.known2"]])
            defer { try? FileManager.default.removeItem(at: single.directory) }
            try await single.register(with: sandbox)
            let good = try await RevokerProcess.run(
                ["check", "--online"],
                environment: [
                    "REVOKER_CONFIG": single.configFile, "REVOKER_APPLE_BASE_URL": sandbox.baseURL,
                    "REVOKER_EXTRA_TRUST_ROOTS_FILE": sandbox.trustRootsFile ?? "",
                ]
            )
            #expect(good.status == 0, "\(good.stderr)")
            Self.expectNoKeyMaterial(good, single)
            #expect(good.stderr.contains("accepted by Apple"))
        }
    }

    @Test("check lists the Google apps and check --online probes Google's revoke and token endpoints")
    func googleOnline() async throws {
        try await RunningSandbox.with { sandbox in
            let configuration = try LocalConfiguration(apps: [
                .apple: ["com.example.app"], .google: ["1-web.apps.googleusercontent.com", "2-web.apps.googleusercontent.com"],
            ])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            try await configuration.register(with: sandbox)
            // Google knows another secret for the second client than the file holds.
            try await sandbox.google.register(clientID: "2-web.apps.googleusercontent.com", clientSecret: "GOCSPX-rotated")
            let environment = configuration.environment(databaseURL: "", sandbox: sandbox)
                .filter { $0.key != "DATABASE_URL" }
            let result = try await RevokerProcess.run(["check", "--online"], environment: environment)
            #expect(result.status == 1, "\(result.stderr)")
            for app in configuration.apps(LocalGoogleAppFiles.self) {
                #expect(!result.stdout.contains(app.clientSecret) && !result.stderr.contains(app.clientSecret), "a client secret was printed")
            }
            let report = try #require(try parseJSON(result.stdout) as? [String: Any])
            let google = try #require(report["google"] as? [String: Any])
            let apps = try #require(google["apps"] as? [[String: Any]])
            let byID = Dictionary(uniqueKeysWithValues: apps.compactMap { app in (app["client_id"] as? String).map { ($0, app) } })
            #expect(byID["1-web.apps.googleusercontent.com"]?["client_secret"] as? String == "loaded")
            #expect((byID["1-web.apps.googleusercontent.com"]?["online"] as? [String: Any])?["result"] as? String == "accepted")
            let wrong = try #require(byID["2-web.apps.googleusercontent.com"]?["online"] as? [String: Any])
            #expect(wrong["result"] as? String == "failed")
            #expect((wrong["detail"] as? String)?.contains("invalid_client") == true)
            #expect(result.stderr.contains("2-web.apps.googleusercontent.com"))
            let statistics = try await sandbox.google.statistics()
            #expect(statistics.byOutcome["/revoke 400 invalid_token"] == 2, "each app's revoke probe reached Google and touched nothing")
        }
    }

    @Test("check lists the Facebook apps and check --online asks the Graph API about each app's own token")
    func facebookOnline() async throws {
        try await RunningSandbox.with { sandbox in
            let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"], .facebook: ["1111111111111111", "2222222222222222"]])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            try await configuration.register(with: sandbox)
            // Facebook knows another secret for the second app than the file holds (it was reset).
            try await FacebookSandboxAdmin(baseURL: sandbox.baseURL + FacebookSandbox.prefix, httpClient: sandbox.httpClient)
                .registerApp(appID: "2222222222222222", appSecret: "0123456789abcdef0123456789abcdef")
            let environment = configuration.environment(databaseURL: "", sandbox: sandbox).filter { $0.key != "DATABASE_URL" }
            let result = try await RevokerProcess.run(["check", "--online"], environment: environment)
            #expect(result.status == 1, "\(result.stderr)")
            for app in configuration.apps(LocalFacebookAppFiles.self) {
                #expect(!result.stdout.contains(app.appSecret) && !result.stderr.contains(app.appSecret), "an app secret was printed")
            }
            let report = try #require(try parseJSON(result.stdout) as? [String: Any])
            let facebook = try #require(report["facebook"] as? [String: Any])
            #expect(facebook["graph_version"] as? String == "v25.0")
            let apps = try #require(facebook["apps"] as? [[String: Any]])
            let byID = Dictionary(uniqueKeysWithValues: apps.compactMap { app in (app["app_id"] as? String).map { ($0, app) } })
            #expect(byID["1111111111111111"]?["app_secret"] as? String == "loaded")
            #expect((byID["1111111111111111"]?["online"] as? [String: Any])?["result"] as? String == "accepted")
            let wrong = try #require(byID["2222222222222222"]?["online"] as? [String: Any])
            #expect(wrong["result"] as? String == "failed" && (wrong["detail"] as? String)?.contains("app secret is wrong") == true, "\(wrong)")
            #expect(result.stderr.contains("2222222222222222"))
        }
    }

    @Test("check reports the database and its migrations when DATABASE_URL is set")
    func database() async throws {
        try await CLIFixture.with { fixture in
            let result = try await fixture.run(["check"])
            #expect(result.status == 0, "\(result.stderr)")
            let report = try #require(try parseJSON(result.stdout) as? [String: Any])
            let database = try #require(report["database"] as? [String: Any])
            #expect(database["reachable"] as? Bool == true)
            #expect(database["migrations_current"] as? Bool == true)
        }
        try await ScratchDatabase.withScratchDatabase(.empty) { database in
            let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"]])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let result = try await RevokerProcess.run(
                ["check"],
                environment: ["REVOKER_CONFIG": configuration.configFile, "DATABASE_URL": database.url]
            )
            #expect(result.status == 1, "\(result.stderr)")
            let report = try #require(try parseJSON(result.stdout) as? [String: Any])
            #expect((report["database"] as? [String: Any])?["migrations_current"] as? Bool == false)
            #expect(result.stderr.contains("revoker migrate"))
        }
    }

    struct Malformed: Sendable, CustomTestStringConvertible {
        var name: String
        var mentions: String
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = [
        Malformed(name: "unknown key", mentions: "Unknown setting 'team'"),
        Malformed(name: "bad team id", mentions: "Team ID"),
        Malformed(name: "missing key file", mentions: "does not exist"),
        Malformed(name: "escaped newlines in APPLE_PRIVATE_KEY", mentions: "\\n"),
        Malformed(name: "not JSON", mentions: "not valid JSON"),
        Malformed(name: "webhook over plain http", mentions: "must use https://"),
        Malformed(name: "webhook secret not whsec", mentions: "whsec_"),
        Malformed(name: "webhook for an unknown app", mentions: "which no configured app has"),
        Malformed(name: "drain_seconds out of range", mentions: "webhook_delivery.drain_seconds"),
        Malformed(name: "webhook lease not longer than its timeout", mentions: "lease_seconds"),
        Malformed(name: "audit signing key not Ed25519", mentions: "audit signing key"),
        Malformed(name: "audit checkpoint interval out of range", mentions: "audit.checkpoint_interval_seconds"),
        Malformed(name: "ui public_url with a path", mentions: "http.ui.public_url"),
        Malformed(name: "ui idle longer than the session", mentions: "http.ui.idle_minutes"),
        Malformed(name: "ui unknown setting", mentions: "Unknown setting 'secure'"),
        Malformed(name: "google client_id under both providers", mentions: "is configured for Apple and for Google"),
        Malformed(name: "google client_id not Google's", mentions: "is not a Google OAuth client ID"),
        Malformed(name: "google secret file missing", mentions: "does not exist"),
        Malformed(name: "google download for another client", mentions: "is for another client_id"),
        Malformed(name: "google unknown setting", mentions: "google.apps[0]"),
        Malformed(name: "extra trust roots file missing", mentions: "extra_trust_roots_file"),
        Malformed(name: "extra trust roots file without a certificate", mentions: "holds no"),
    ]

    @Test("a malformed configuration exits 2 with one clear line", arguments: malformed)
    func malformedConfiguration(_ input: Malformed) async throws {
        let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"]])
        defer { try? FileManager.default.removeItem(at: configuration.directory) }
        let app = try #require(configuration.apps(LocalAppFiles.self).first)
        let keys = try String(contentsOfFile: configuration.sealingKeysFile, encoding: .utf8)
        var entry = app.configurationEntry
        var environment: [String: String] = ["REVOKER_SEALING_KEYS": keys]
        var document: Any = ["apps": [entry]]
        switch input.name {
        case "unknown key":
            entry["team"] = "TEAM000001"
            document = ["apps": [entry]]
        case "bad team id":
            entry["team_id"] = "team-1"
            document = ["apps": [entry]]
        case "missing key file":
            entry["private_key_file"] = configuration.directory.appendingPathComponent("AuthKey_MISSING.p8").path
            document = ["apps": [entry]]
        case "escaped newlines in APPLE_PRIVATE_KEY":
            document = [String: Any]()
            environment["APPLE_CLIENT_ID"] = app.clientID
            environment["APPLE_TEAM_ID"] = app.teamID
            environment["APPLE_KEY_ID"] = app.keyID
            environment["APPLE_PRIVATE_KEY"] = app.privateKeyPEM.trimmingCharacters(in: .newlines).replacingOccurrences(of: "\n", with: "\\n")
        case "webhook over plain http", "webhook secret not whsec", "webhook for an unknown app":
            let secretFile = configuration.directory.appendingPathComponent("webhook-secret").path
            let secret = input.name == "webhook secret not whsec" ? "hunter2" : "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
            #expect(FileManager.default.createFile(atPath: secretFile, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o600]))
            document = [
                "apps": [entry],
                "webhooks": [
                    [
                        "name": "backend", "secret_file": secretFile,
                        "url": input.name == "webhook over plain http" ? "http://hooks.example.com/revoker" : "https://hooks.example.com/revoker",
                        "client_ids": [input.name == "webhook for an unknown app" ? "com.example.other" : app.clientID],
                    ]
                ],
            ]
        case "drain_seconds out of range":
            document = ["apps": [entry], "webhook_delivery": ["drain_seconds": 0]]
        case "webhook lease not longer than its timeout":
            document = ["apps": [entry], "webhook_delivery": ["lease_seconds": 10, "timeout_seconds": 10]]
        case "audit signing key not Ed25519":
            // The app's P-256 key where the Ed25519 key belongs: refused, its content never shown.
            document = ["apps": [entry], "audit": ["signing_key_file": app.privateKeyFile]]
        case "audit checkpoint interval out of range":
            document = ["apps": [entry], "audit": ["checkpoint_interval_seconds": 0]]
        case "ui public_url with a path":
            document = ["apps": [entry], "http": ["ui": ["enabled": true, "public_url": "https://revoker.example.com/ui"]]]
        case "ui idle longer than the session":
            document = ["apps": [entry], "http": ["ui": ["enabled": true, "session_hours": 1, "idle_minutes": 90]]]
        case "ui unknown setting":
            document = ["apps": [entry], "http": ["ui": ["enabled": true, "secure": true]]]
        case "extra trust roots file missing":
            document = ["apps": [entry], "extra_trust_roots_file": configuration.directory.appendingPathComponent("absent.pem").path]
        case "extra trust roots file without a certificate":
            // A key where certificates belong: refused, its content never shown.
            document = ["apps": [entry], "extra_trust_roots_file": app.privateKeyFile]
        case let name where name.hasPrefix("google"):
            let secretFile = configuration.directory.appendingPathComponent("google-secret").path
            let download = #"{"web": {"client_id": "9-other.apps.googleusercontent.com", "client_secret": "GOCSPX-x"}}"#
            let text = name == "google download for another client" ? download : "GOCSPX-secret"
            #expect(FileManager.default.createFile(atPath: secretFile, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]))
            var google: [String: Any] = ["client_id": "1-web.apps.googleusercontent.com", "client_secret_file": secretFile]
            switch name {
            case "google client_id under both providers": entry["client_id"] = "1-web.apps.googleusercontent.com"
            case "google client_id not Google's": google["client_id"] = "com.example.google"
            case "google secret file missing": google["client_secret_file"] = secretFile + ".absent"
            case "google unknown setting": google["secret"] = "GOCSPX-inline"
            default: break
            }
            document = ["apps": [entry], "google": ["apps": [google]]]
        default:
            break
        }
        let file = configuration.directory.appendingPathComponent("malformed.json")
        if input.name == "not JSON" {
            try Data("{\"apps\": [".utf8).write(to: file)
        } else {
            try JSONSerialization.data(withJSONObject: document).write(to: file)
        }
        let result = try await RevokerProcess.run(["check", "--config", file.path], environment: environment)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        let lines = result.stderr.split(whereSeparator: \.isNewline)
        #expect(lines.count == 1, "\(result.stderr)")
        #expect(lines.first?.hasPrefix("revoker: ") == true)
        #expect(result.stderr.contains(input.mentions), "\(result.stderr)")
        Self.expectNoKeyMaterial(result, configuration)
        #expect(!result.stderr.contains(keys.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "=", maxSplits: 1).last ?? "-"))
    }

    @Test("keygen prints a usable key entry and a rotation hint")
    func keygen() async throws {
        let result = try await RevokerProcess.run(["keygen"], environment: [:])
        #expect(result.status == 0, "\(result.stderr)")
        let line = result.stdout.trimmingCharacters(in: .newlines)
        #expect(!line.contains("\n"))
        #expect(line.wholeMatch(of: /k[0-9]{8}=[A-Za-z0-9+\/]{43}=/) != nil, "\(line)")
        let keyring = try CredentialKeyring(parsing: line)
        #expect(keyring.currentKeyID == String(line.prefix(9)))
        #expect(result.stderr.contains("REVOKER_SEALING_KEYS_FILE"))
        #expect(result.stderr.contains("last line"))

        let named = try await RevokerProcess.run(["keygen", "--key-id", "2026-q3"], environment: [:])
        #expect(named.status == 0)
        #expect(named.stdout.hasPrefix("2026-q3="))
        #expect(named.stdout != result.stdout)

        let bad = try await RevokerProcess.run(["keygen", "--key-id", "bad id"], environment: [:])
        #expect(bad.status == 2)
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.contains("key ids are"))

        let audit = try await RevokerProcess.run(["keygen", "--audit"], environment: [:])
        #expect(audit.status == 0)
        let signing = try AuditSigningKey(pemRepresentation: audit.stdout)
        #expect(audit.stderr.contains(signing.publicKey.keyID) && audit.stderr.contains("audit.signing_key_file"))
        let both = try await RevokerProcess.run(["keygen", "--audit", "--webhook"], environment: [:])
        #expect(both.status != 0 && both.stdout.isEmpty)
    }

    @Test("every command's --help has an abstract and an example", arguments: ["enqueue", "status", "audit", "check", "keygen"])
    func help(_ command: String) async throws {
        let result = try await RevokerProcess.run([command, "--help"], environment: [:])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("OVERVIEW: "))
        #expect(result.stdout.contains("Example"))
        #expect(result.stdout.contains("OPTIONS:"))
    }
}
