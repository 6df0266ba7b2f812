import AppleSignIn
import AppleSignInSandbox
import Configuration
import Crypto
import FacebookLogin
import Foundation
import GoogleSignIn
import ProviderSandbox
import RevokerApp
import RevokerEvidence
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWebhooks
import RevokerWorker
import Synchronization
import Testing

/// The configuration's contract, pinned before it is re-implemented: every key of
/// `deploy/revoker.example.json` reaches the loaded configuration, every environment variable
/// docs/operations.md documents does what it says (and wins over the file), and the one-line errors
/// stay. Nothing here connects to a database.
@Suite("configuration contract")
struct ConfigurationContractTests {
    /// Every key of the example, its files replaced by real ones, arrives in the configuration
    /// with the example's value; a key of the example this test does not map fails it.
    @Test("the example file loads, every key with its value")
    func exampleLoads() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let example = try materials.example()
        let configuration = try RevokerConfiguration.load(file: try materials.write(example), environment: [:], needs: .all)
        let settings = Setting.all

        for leaf in leaves(of: example, mapped: Set(settings.keys)) {
            guard let setting = settings[leaf.pattern] else {
                Issue.record("The example's \(leaf.text) has no expectation in this test: map it to the configuration property it sets.")
                continue
            }
            let expected = materials.expected(for: leaf, setting: setting)
            let loaded = setting.read(configuration, leaf.entry)
            #expect(
                same(loaded, expected, unordered: setting.unordered),
                "\(leaf.text): the example says \(expected), the configuration holds \(loaded)"
            )
        }
        // An optional key an entry leaves out is absent (or its documented default), not another entry's value.
        for entry in arrayEntries(of: example) {
            for (pattern, setting) in settings.sorted(by: { $0.key < $1.key }) {
                let prefix = entry.pattern + "."
                guard pattern.hasPrefix(prefix), !pattern.dropFirst(prefix.count).contains(where: { ".[".contains($0) }) else { continue }
                let key = String(pattern.dropFirst(prefix.count))
                guard entry.object[key] == nil else { continue }
                let expected = setting.expected?(.null, entry.object) ?? .null
                let loaded = setting.read(configuration, entry.object)
                #expect(same(loaded, expected), "\(entry.text) leaves out \(key): expected \(expected), the configuration holds \(loaded)")
            }
        }
        // Nothing more than the example lists.
        #expect(configuration.apps.count == example["apps"]?.items.count)
        #expect(configuration.googleApps.count == example["google"]?["apps"]?.items.count)
        #expect(configuration.facebookApps.count == example["facebook"]?["apps"]?.items.count)
        #expect(configuration.webhooks.count == example["webhooks"]?.items.count)
        #expect(configuration.http.apiKeys.count == example["http"]?["api_keys"]?.items.count)
        #expect(configuration.warnings == [], "the generated secret files are mode 600")
    }

    /// Each setting of the example that has a default is read, not merely equal to its default:
    /// set alone to another valid value, the configuration holds that value.
    @Test("every setting of the example is read, not defaulted")
    func everySettingIsRead() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let example = try materials.example()
        let settings = Setting.all
        var tried = 0
        for (pattern, setting) in settings.sorted(by: { $0.key < $1.key }) {
            guard let alternative = setting.alternative else { continue }
            let path = pattern.split(separator: ".").map { Step.key(String($0)) }
            guard let original = example.value(at: path) else {
                Issue.record("\(pattern) has an alternative but the example does not set it")
                continue
            }
            #expect(!same(original, alternative), "\(pattern): the alternative must differ from the example's value")
            var document = example
            document.set(alternative, at: path[...])
            let configuration = try RevokerConfiguration.load(file: try materials.write(document), environment: [:], needs: [])
            let entry = example.value(at: path.dropLast())?.members ?? [:]
            let expected = setting.expected?(alternative, entry) ?? alternative
            let loaded = setting.read(configuration, entry)
            #expect(same(loaded, expected, unordered: setting.unordered), "\(pattern) set to \(alternative): the configuration holds \(loaded)")
            tried += 1
        }
        #expect(tried >= 40, "the scalar settings of the example each have an alternative")
    }

    /// docs/operations.md's table of environment variables: each name is one Revoker reads, and each
    /// set alone (with the companions it needs) changes the configuration as documented, with
    /// no file and over the example's file (the environment wins).
    @Test("every environment variable the docs document works")
    func documentedVariablesWork() throws {
        let documented = try documentedVariables()
        #expect(documented.count >= 20, "docs/operations.md's table of variables was found: \(documented)")
        for name in documented where !knownVariables.contains(name) {
            Issue.record("docs/operations.md documents \(name), which is not one of RevokerConfiguration.variableNames.")
        }

        let materials = try Materials()
        defer { materials.remove() }
        let cases = try VariableCase.all(materials)
        for name in documented where cases[name] == nil {
            Issue.record("docs/operations.md documents \(name) but this test has no expectation for it: add one to VariableCase.all.")
        }
        for name in cases.keys.sorted() where !documented.contains(name) {
            Issue.record("This test expects \(name) to be documented, but docs/operations.md's table no longer lists it.")
        }

        let example = try materials.example()
        let defaults = try RevokerConfiguration.load(file: nil, environment: [:], needs: [])
        for (name, variable) in cases.sorted(by: { $0.key < $1.key }) where documented.contains(name) {
            // With no file.
            #expect(!same(variable.read(defaults), variable.expected), "\(name): the value expected is the default, so it shows nothing")
            do {
                let configuration = try RevokerConfiguration.load(file: nil, environment: variable.environment, needs: variable.needs)
                let loaded = variable.read(configuration)
                #expect(same(loaded, variable.expected), "\(name) (no file): expected \(variable.expected), the configuration holds \(loaded)")
            } catch {
                Issue.record("\(name) (no file) is refused: \(error)")
            }
            // Over the example's file, which sets something else.
            var document = example
            for (key, value) in variable.file { document.set(value, at: [Step.key(key)][...]) }
            let file = try materials.write(document)
            if variable.overridesFile {
                let fromFile = try RevokerConfiguration.load(file: file, environment: [:], needs: [])
                #expect(!same(variable.read(fromFile), variable.expected), "\(name): the file must set something else for the override to show")
            }
            do {
                let configuration = try RevokerConfiguration.load(file: file, environment: variable.environment, needs: variable.needs)
                let loaded = variable.read(configuration)
                #expect(same(loaded, variable.expected), "\(name) (over the file): expected \(variable.expected), the configuration holds \(loaded)")
            } catch {
                Issue.record("\(name) (over the file) is refused: \(error)")
            }
            // Without its companions, a variable of an incomplete app is refused naming what is missing.
            if !variable.lacking.isEmpty, let value = variable.environment[name] {
                let error = #expect(throws: ConfigurationError.self, "\(name) alone is refused") {
                    try RevokerConfiguration.load(file: nil, environment: [name: value], needs: [])
                }
                if let message = error?.message {
                    #expect(message.contains("incomplete"), "\(name) alone: \(message)")
                    for missing in variable.lacking {
                        #expect(message.contains(missing), "\(name) alone: the refusal names \(missing): \(message)")
                    }
                    #expect(isOneLine(message), "\(name) alone: one line")
                }
            }
        }
    }

    /// `worker.provider_timeout_seconds`, its older name, both, and the range.
    @Test("worker.provider_timeout_seconds and its older name apple_timeout_seconds")
    func providerTimeout() throws {
        let materials = try Materials()
        defer { materials.remove() }
        func load(_ worker: [String: JSON]) throws -> RevokerConfiguration {
            try RevokerConfiguration.load(file: try materials.write(.object(["worker": .object(worker)])), environment: [:], needs: [])
        }
        let current = try load(["provider_timeout_seconds": .number(7.5)])
        #expect(current.worker.providerTimeout == .milliseconds(7500))
        let older = try load(["apple_timeout_seconds": .number(3)])
        #expect(older.worker.providerTimeout == .seconds(3))
        let unset = try load([:])
        #expect(unset.worker.providerTimeout == WorkerSettings().providerTimeout)

        let both = #expect(throws: ConfigurationError.self) {
            try load(["provider_timeout_seconds": .number(5), "apple_timeout_seconds": .number(5)])
        }
        if let message = both?.message {
            #expect(message.contains("worker.provider_timeout_seconds"), "\(message)")
            #expect(message.contains("worker.apple_timeout_seconds"), "\(message)")
            #expect(isOneLine(message))
        }
        for (key, value) in [("provider_timeout_seconds", 0.0), ("provider_timeout_seconds", 121), ("apple_timeout_seconds", 0)] {
            let error = #expect(throws: ConfigurationError.self, "\(key) = \(value) is refused") { try load([key: .number(value)]) }
            if let message = error?.message {
                #expect(message.contains("worker.\(key)"), "\(message)")
                #expect(message.contains("between 0.1 and 120"), "the range: \(message)")
                #expect(isOneLine(message))
            }
        }
    }

    /// A variable that cannot be its setting's type, or lies outside its range, is refused
    /// naming the variable, not the file's key.
    @Test("a bad environment variable is refused, naming the variable")
    func badVariable() throws {
        let cases: [(String, String, [String])] = [
            (RevokerConfiguration.Variable.httpPort, "eighty", ["REVOKER_HTTP_PORT", "must be an integer"]),
            (RevokerConfiguration.Variable.httpPort, "70000", ["REVOKER_HTTP_PORT", "between 0 (any free port) and 65535"]),
            (AppleSettings.Variable.baseURL, "ftp://apple.example", ["REVOKER_APPLE_BASE_URL", "not an http(s) URL"]),
            (GoogleSettings.Variable.certsURL, "keys", ["REVOKER_GOOGLE_CERTS_URL", "not an http(s) URL"]),
            (FacebookSettings.Variable.graphBaseURL, "graph.facebook.com", ["REVOKER_FACEBOOK_GRAPH_BASE_URL", "not an http(s) URL"]),
            (FacebookSettings.Variable.graphVersion, "25.0", ["REVOKER_FACEBOOK_GRAPH_VERSION", "not of the form v25.0"]),
        ]
        for (name, value, mentions) in cases {
            let error = #expect(throws: ConfigurationError.self, "\(name)=\(value) is refused") {
                try RevokerConfiguration.load(file: nil, environment: [name: value], needs: [])
            }
            guard let message = error?.message else { continue }
            for mention in mentions { #expect(message.contains(mention), "names \(mention): \(message)") }
            #expect(isOneLine(message))
        }
        // An empty variable is not set: the file's value stands.
        let materials = try Materials()
        defer { materials.remove() }
        let file = try materials.write(.object(["http": .object(["port": .number(9091)])]))
        let configuration = try RevokerConfiguration.load(file: file, environment: [RevokerConfiguration.Variable.httpPort: ""], needs: [])
        #expect(configuration.http.port == 9091)
    }

    /// The values that hold secrets (the database password, sealing keys, an Apple key) are
    /// marked secret where they are read, from the file or the environment, so that an access
    /// log redacts them; the others are not.
    @Test("secrets are marked secret when read, from the file and the environment")
    func secretsAreMarked() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let pem = try LocalAppFiles(clientID: "com.example.secret", teamID: "TEAMSECRET", keyID: "KEYSECRET1", directory: materials.directory)
        let file = try materials.write(
            .object(["database_url": .string("postgres://u:file-password@h/d"), "http": .object(["host": .string("::1")])])
        )
        let reads = ReadLog()
        _ = try RevokerConfiguration.load(
            file: file,
            environment: [
                RevokerConfiguration.Variable.sealingKeys: try CredentialKeyring.generateEntry(keyID: "env"),
                AppleSettings.Variable.clientID: pem.clientID, AppleSettings.Variable.teamID: pem.teamID, AppleSettings.Variable.keyID: pem.keyID,
                AppleSettings.Variable.privateKey: try String(contentsOfFile: pem.privateKeyFile, encoding: .utf8),
            ],
            needs: [],
            accessReporter: reads
        )
        let secret: Set<String> = ["database_url", "sealing_keys", "apple_app.private_key"]
        let found = reads.values
        for key in secret.sorted() {
            #expect(found[key]?.isEmpty == false, "\(key) was read")
            #expect(found[key]?.allSatisfy { $0 } == true, "\(key) is marked secret by every source that has it")
        }
        for key in ["http.host", "apple_app.client_id"] {
            #expect(found[key]?.isEmpty == false && found[key]?.contains(true) == false, "\(key) is not a secret")
        }
    }

    /// An unknown key names itself and lists the known ones.
    @Test("an unknown key is refused, naming it and listing the known ones")
    func unknownKey() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let example = try exampleDocument()
        let cases: [(JSON, typo: String, place: String, known: Set<String>)] = [
            (.object(["databse_url": .string("postgres://u@h/d")]), "databse_url", "the top level", keys(of: example)),
            (
                .object(["worker": .object(["concurency": .number(4)])]), "concurency", "worker",
                keys(of: example["worker"]).union(["apple_timeout_seconds"])
            ),
            (
                .object(["apps": .array([.object(["clientid": .string("com.example.app")])])]), "clientid", "apps[0]",
                keys(of: example["apps"]?.items.first)
            ),
            (.object(["http": .object(["ui": .object(["enable": .bool(true)])])]), "enable", "http.ui", keys(of: example["http"]?["ui"])),
        ]
        for (document, typo, place, known) in cases {
            let file = try materials.write(document)
            let error = #expect(throws: ConfigurationError.self, "'\(typo)' is refused") {
                try RevokerConfiguration.load(file: file, environment: [:], needs: [])
            }
            guard let message = error?.message else { continue }
            #expect(message.contains("Unknown setting '\(typo)'"), "\(message)")
            #expect(message.contains("at \(place) of"), "\(message)")
            #expect(message.contains(file), "names the file: \(message)")
            #expect(isOneLine(message))
            let listed = message.components(separatedBy: "known: ").last.map {
                Set($0.trimmingCharacters(in: CharacterSet(charactersIn: ".")).components(separatedBy: ", "))
            }
            #expect(listed.map { known.isSubset(of: $0) } == true, "lists every known key of \(place) (\(known.sorted())): \(message)")
        }
    }

    /// A value of the wrong type names its field path.
    @Test("a wrong type is refused, naming the field path")
    func wrongType() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let cases: [(JSON, field: String)] = [
            (.object(["worker": .object(["concurrency": .string("sixteen")])]), "worker.concurrency"),
            (.object(["http": .object(["port": .string("8080")])]), "http.port"),
            (.object(["apps": .array([.object(["client_id": .number(5)])])]), "apps[0].client_id"),
            (
                .object(["google": .object(["apps": .array([.object(["audiences": .string("x.apps.googleusercontent.com")])])])]),
                "google.apps[0].audiences"
            ),
            (.object(["facebook": .object(["apps": .array([.object(["app_id": .number(5)])])])]), "facebook.apps[0].app_id"),
            (
                .object([
                    "http": .object([
                        "api_keys": .array([
                            .object(["name": .string("k"), "sha256": .string(String(repeating: "0", count: 64)), "scopes": .string("admin")])
                        ])
                    ])
                ]), "http.api_keys[0].scopes"
            ),
        ]
        for (document, field) in cases {
            let file = try materials.write(document)
            let error = #expect(throws: ConfigurationError.self, "\(field) of the wrong type is refused") {
                try RevokerConfiguration.load(file: file, environment: [:], needs: [])
            }
            guard let message = error?.message else { continue }
            #expect(message.contains("\(field) has the wrong type"), "\(message)")
            #expect(message.contains(file), "names the file: \(message)")
            #expect(isOneLine(message))
        }
    }

    /// An app, Google or Facebook app, webhook or API key without a required field names what is missing.
    @Test("a missing required field is refused, naming what is missing")
    func missingRequiredField() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let cases: [(JSON, names: [String])] = [
            (
                .object(["apps": .array([.object(["client_id": .string("com.example.app"), "team_id": .string("ABCDE12345")])])]),
                ["app 1 (com.example.app)", "lacks", "key_id", "private_key_file"]
            ),
            (
                .object(["google": .object(["apps": .array([.object(["client_id": .string("1-web.apps.googleusercontent.com")])])])]),
                ["google.apps[0] (1-web.apps.googleusercontent.com)", "lacks", "client_secret_file"]
            ),
            (
                .object(["facebook": .object(["apps": .array([.object(["app_id": .string("1234567890123456")])])])]),
                ["facebook.apps[0] (1234567890123456)", "lacks", "app_secret_file"]
            ),
            (
                .object(["webhooks": .array([.object(["name": .string("hook"), "url": .string("https://h.example")])])]),
                ["webhooks[0]", "lacks", "secret_file", "client_ids"]
            ),
            (
                .object(["http": .object(["api_keys": .array([.object(["name": .string("k"), "scopes": .array([.string("admin")])])])])]),
                ["http.api_keys[0].sha256", "is missing"]
            ),
        ]
        for (document, names) in cases {
            let file = try materials.write(document)
            let error = #expect(throws: ConfigurationError.self, "\(names[0]) is refused") {
                try RevokerConfiguration.load(file: file, environment: [:], needs: [])
            }
            guard let message = error?.message else { continue }
            for name in names { #expect(message.contains(name), "names \(name): \(message)") }
            #expect(isOneLine(message))
        }
    }

    /// A key or secret file that cannot be read names the file and the setting.
    @Test("an unreadable key file is refused, naming the file and the setting")
    func unreadableKeyFile() throws {
        let materials = try Materials()
        defer { materials.remove() }
        let example = try materials.example()
        let missing = materials.directory.appendingPathComponent("no-such-dir/no-such-file").path
        let cases: [(path: [Step], names: [String])] = [
            ([.key("sealing_keys_file")], ["sealing key file", "cannot be read", "sealing_keys_file", "REVOKER_SEALING_KEYS_FILE"]),
            ([.key("intake_keys_file")], ["intake key file", "cannot be read", "intake_keys_file", "REVOKER_INTAKE_KEYS_FILE"]),
            (
                [.key("extra_trust_roots_file")],
                ["extra trust roots file", "cannot be read", "extra_trust_roots_file", "REVOKER_EXTRA_TRUST_ROOTS_FILE"]
            ),
            ([.key("audit"), .key("signing_key_file")], ["audit signing key file", "cannot be read", "audit.signing_key_file"]),
            ([.key("audit"), .key("public_key_files")], ["audit public key file", "cannot be read", "audit.public_key_files"]),
            ([.key("apps"), .index(0), .key("private_key_file")], ["private key file", "does not exist", "app 1 (com.example.app)"]),
            ([.key("google"), .key("apps"), .index(0), .key("client_secret_file")], ["client secret file", "does not exist", "google.apps[0]"]),
            ([.key("facebook"), .key("apps"), .index(0), .key("app_secret_file")], ["app secret file", "does not exist", "facebook.apps[0]"]),
            ([.key("webhooks"), .index(0), .key("secret_file")], ["secret file", "cannot be read", "webhooks[0]"]),
        ]
        for (path, names) in cases {
            var document = example
            document.set(path.last == .key("public_key_files") ? .array([.string(missing)]) : .string(missing), at: path[...])
            let file = try materials.write(document)
            let error = #expect(throws: ConfigurationError.self, "\(path.text) unreadable is refused") {
                try RevokerConfiguration.load(file: file, environment: [:], needs: [])
            }
            guard let message = error?.message else { continue }
            #expect(message.contains(missing), "names the file: \(message)")
            for name in names { #expect(message.contains(name), "names \(name): \(message)") }
            #expect(isOneLine(message))
        }
    }
}

/// Every value a source had for each key read, as whether it was marked secret.
private final class ReadLog: AccessReporter, Sendable {
    private let log = Mutex<[String: [Bool]]>([:])

    func report(_ event: AccessEvent) {
        let key = event.metadata.key.components.joined(separator: ".")
        let marks = event.providerResults.compactMap { try? $0.result.get().value?.isSecret }
        log.withLock { $0[key, default: []] += marks }
    }

    var values: [String: [Bool]] { log.withLock { $0 } }
}

// MARK: - The example's settings

/// The providers' settings under the names the file's keys had before each provider read its own.
extension RevokerConfiguration {
    fileprivate var apps: [String: AppleAppSettings] { settings(AppleSettings.self)?.apps ?? [:] }
    fileprivate var appleBaseURL: String { settings(AppleSettings.self)?.baseURL ?? "" }
    fileprivate var appleNotifications: AppleNotificationVerifier.Settings? { settings(AppleSettings.self)?.notifications }
    fileprivate var googleApps: [String: GoogleApp] { settings(GoogleSettings.self)?.apps ?? [:] }
    fileprivate var google: GoogleClient.Configuration { settings(GoogleSettings.self)?.client ?? .init() }
    fileprivate var facebookApps: [String: FacebookApp] { settings(FacebookSettings.self)?.apps ?? [:] }
    fileprivate var facebook: FacebookClient.Configuration { settings(FacebookSettings.self)?.client ?? .init() }
}

/// How one key of the configuration file arrives in the loaded configuration.
private struct Setting {
    /// What the configuration holds, written as the file writes it (`.null` when absent); `entry`
    /// is the object holding the key (an app, a webhook…), to find the loaded one by its id.
    var read: (RevokerConfiguration, _ entry: [String: JSON]) -> JSON
    /// Lists compared as sets.
    var unordered = false
    /// Another valid value, to show that the key is read and not merely equal to its default.
    var alternative: JSON?
    /// What `read` gives for a value of the file (the value itself unless given).
    var expected: ((JSON, _ entry: [String: JSON]) -> JSON)?

    init(
        unordered: Bool = false,
        alternative: JSON? = nil,
        expected: ((JSON, [String: JSON]) -> JSON)? = nil,
        _ read: @escaping (RevokerConfiguration, [String: JSON]) -> JSON
    ) {
        self.read = read
        self.unordered = unordered
        self.alternative = alternative
        self.expected = expected
    }

    /// `tracing.endpoint`: the collector's base URL with the traces path appended.
    static func tracesURL(_ value: JSON, entry: [String: JSON]) -> JSON {
        .text(value.stringValue.map { $0 + "/v1/traces" })
    }

    /// `tracing.headers`: values percent-decoded.
    static func percentDecoded(_ value: JSON, entry: [String: JSON]) -> JSON {
        .text(value.stringValue?.removingPercentEncoding)
    }

    /// A Google app's audiences: its client_id first, then the ones listed (or none).
    static func clientIDFirst(_ value: JSON, entry: [String: JSON]) -> JSON {
        var all = [entry["client_id"] ?? .null]
        for audience in value.items where !all.contains(audience) { all.append(audience) }
        return .array(all)
    }

    /// Every key of the file, by pattern (`apps[].team_id`). Keys that name files (`*_file`,
    /// `*_files`, `witness_path`) read what the file held, compared with what was written to it.
    static var all: [String: Setting] {
        let appleApp = { (c: RevokerConfiguration, entry: [String: JSON]) in c.apps[entry["client_id"]?.stringValue ?? ""] }
        let googleApp = { (c: RevokerConfiguration, entry: [String: JSON]) in c.googleApps[entry["client_id"]?.stringValue ?? ""] }
        let facebookApp = { (c: RevokerConfiguration, entry: [String: JSON]) in c.facebookApps[entry["app_id"]?.stringValue ?? ""] }
        let webhook = { (c: RevokerConfiguration, entry: [String: JSON]) in c.webhooks.first { $0.name == entry["name"]?.stringValue } }
        let apiKey = { (c: RevokerConfiguration, entry: [String: JSON]) in c.http.apiKeys.first { $0.name == entry["name"]?.stringValue } }
        let appRate = { (c: RevokerConfiguration, entry: [String: JSON]) in
            c.worker.appRequestsPerSecond[entry["client_id"]?.stringValue ?? ""].map(JSON.number) ?? .null
        }
        // A Facebook app's app_id is its client_id.
        let facebookAppRate = { (c: RevokerConfiguration, entry: [String: JSON]) in
            c.worker.appRequestsPerSecond[entry["app_id"]?.stringValue ?? ""].map(JSON.number) ?? .null
        }
        return [
            "database_url": Setting(alternative: .string("postgres://other:pw@db2.example.internal:5433/revoker2")) { c, _ in
                .string(c.databaseURL)
            },
            "apple_base_url": Setting(alternative: .string("https://apple.example.test")) { c, _ in .string(c.appleBaseURL) },
            "extra_trust_roots_file": Setting { c, _ in .string("\(c.extraTrustRootsFile ?? "none"): \(c.extraTrustRoots.count) certificate(s)") },
            "sealing_keys_file": Setting { c, _ in .string(c.keyring.currentKeyID) },
            "intake_keys_file": Setting { c, _ in .array(c.intakeKeys.map { .string($0.id) }) },

            "apps[].client_id": Setting { c, entry in .text(appleApp(c, entry)?.apple.clientID) },
            "apps[].team_id": Setting { c, entry in .text(appleApp(c, entry)?.apple.teamID) },
            "apps[].key_id": Setting { c, entry in .text(appleApp(c, entry)?.apple.keyID) },
            "apps[].private_key_file": Setting { c, entry in .text(appleApp(c, entry)?.apple.signingKey.publicKeyPEM) },
            "apps[].redirect_uri": Setting { c, entry in .text(appleApp(c, entry)?.defaultRedirectURI) },
            "apps[].max_requests_per_second": Setting(appRate),

            "google.oauth_base_url": Setting(alternative: .string("https://oauth.google.example.test")) { c, _ in .string(c.google.oauthBaseURL) },
            "google.certs_url": Setting(alternative: .string("https://keys.google.example.test/certs")) { c, _ in .string(c.google.certsURL) },
            "google.risc_configuration_url": Setting(alternative: .string("https://risc.google.example.test/risc")) { c, _ in
                .string(c.google.riscConfigurationURL)
            },
            "google.apps[].client_id": Setting { c, entry in .text(googleApp(c, entry)?.clientID) },
            "google.apps[].client_secret_file": Setting { c, entry in
                .text(googleApp(c, entry).map { fingerprint(ofSecret: $0.clientSecret.value) })
            },
            // The client_id is always an audience, first; the listed ones follow.
            "google.apps[].audiences": Setting(expected: clientIDFirst) { c, entry in
                googleApp(c, entry).map { .array($0.audiences.map(JSON.string)) } ?? .null
            },
            "google.apps[].redirect_uri": Setting { c, entry in .text(googleApp(c, entry)?.defaultRedirectURI) },
            "google.apps[].max_requests_per_second": Setting(appRate),

            "facebook.graph_base_url": Setting(alternative: .string("https://graph.facebook.example.test")) { c, _ in
                .string(c.facebook.graphBaseURL)
            },
            "facebook.graph_version": Setting(alternative: .string("v24.0")) { c, _ in .string(c.facebook.graphVersion) },
            "facebook.limited_login_keys_url": Setting(alternative: .string("https://keys.facebook.example.test/jwks/")) { c, _ in
                .string(c.facebook.limitedLoginKeysURL)
            },
            "facebook.limited_login_uninstall_url": Setting(alternative: .string("https://uninstall.facebook.example.test/platform/uninstall/")) {
                c,
                _ in .string(c.facebook.limitedLoginUninstallURL)
            },
            "facebook.apps[].app_id": Setting { c, entry in .text(facebookApp(c, entry)?.appID) },
            "facebook.apps[].app_secret_file": Setting { c, entry in
                .text(facebookApp(c, entry).map { fingerprint(ofSecret: $0.secret.value) })
            },
            "facebook.apps[].max_requests_per_second": Setting(facebookAppRate),

            "worker.concurrency": Setting(alternative: .number(3)) { c, _ in .integer(c.worker.concurrency) },
            "worker.batch_size": Setting(alternative: .number(7)) { c, _ in .integer(c.worker.batchSize) },
            "worker.lease_seconds": Setting(alternative: .number(45)) { c, _ in .seconds(c.worker.lease) },
            "worker.max_attempts": Setting(alternative: .number(4)) { c, _ in .integer(c.worker.maxAttempts) },
            "worker.poll_interval_seconds": Setting(alternative: .number(2.5)) { c, _ in .seconds(c.worker.pollInterval) },
            "worker.retry_base_seconds": Setting(alternative: .number(0.5)) { c, _ in .seconds(c.worker.retryBase) },
            "worker.retry_cap_seconds": Setting(alternative: .number(900)) { c, _ in .seconds(c.worker.retryCap) },
            "worker.pause_probe_seconds": Setting(alternative: .number(120)) { c, _ in .seconds(c.worker.pauseProbeInterval) },
            "worker.shutdown_grace_seconds": Setting(alternative: .number(5)) { c, _ in .seconds(c.worker.shutdownGrace) },
            "worker.client_secret_lifetime_seconds": Setting(alternative: .number(600)) { c, _ in .seconds(c.worker.clientSecretLifetime) },
            "worker.provider_timeout_seconds": Setting(alternative: .number(7.5)) { c, _ in .seconds(c.worker.providerTimeout) },
            "worker.apple_timeout_seconds": Setting { c, _ in .seconds(c.worker.providerTimeout) },
            "worker.max_requests_per_second": Setting(alternative: .number(75)) { c, _ in c.worker.maxRequestsPerSecond.map(JSON.number) ?? .null },
            "custody.validate_every_days": Setting(alternative: .number(7)) { c, _ in
                c.worker.grantValidationInterval.map { .number(Double($0.components.seconds) / 86_400) } ?? .null
            },

            "webhooks[].name": Setting { c, entry in .text(webhook(c, entry)?.name) },
            "webhooks[].url": Setting { c, entry in .text(webhook(c, entry)?.url) },
            "webhooks[].secret_file": Setting { c, entry in .text(webhook(c, entry).map { fingerprint(ofWebhookSecret: $0.secret) }) },
            "webhooks[].client_ids": Setting(unordered: true) { c, entry in .list(webhook(c, entry)?.clientIDs) },

            "webhook_delivery.timeout_seconds": Setting(alternative: .number(20)) { c, _ in .seconds(c.webhookDelivery.timeout) },
            "webhook_delivery.retry_base_seconds": Setting(alternative: .number(3)) { c, _ in .seconds(c.webhookDelivery.retryBase) },
            "webhook_delivery.retry_cap_seconds": Setting(alternative: .number(1200)) { c, _ in .seconds(c.webhookDelivery.retryCap) },
            "webhook_delivery.park_after_seconds": Setting(alternative: .number(7200)) { c, _ in .seconds(c.webhookDelivery.parkAfter) },
            "webhook_delivery.poll_interval_seconds": Setting(alternative: .number(1)) { c, _ in .seconds(c.webhookDelivery.pollInterval) },
            "webhook_delivery.lease_seconds": Setting(alternative: .number(90)) { c, _ in .seconds(c.webhookDelivery.lease) },
            "webhook_delivery.drain_seconds": Setting(alternative: .number(30)) { c, _ in .seconds(c.webhookDelivery.drainLimit) },
            "webhook_delivery.from_start": Setting(alternative: .bool(true)) { c, _ in .bool(c.webhookDelivery.fromStart) },

            "audit.signing_key_file": Setting { c, _ in .text(c.audit.signingKey?.publicKey.keyID) },
            "audit.public_key_files": Setting { c, _ in .array(c.audit.previousKeys.map { .string($0.keyID) }) },
            "audit.checkpoint_interval_seconds": Setting(alternative: .number(15)) { c, _ in .seconds(c.audit.checkpointInterval) },
            "audit.witness_path": Setting { c, _ in .text(c.audit.witnessPath) },

            "tracing.enabled": Setting(alternative: .bool(false)) { c, _ in .bool(c.tracing.enabled) },
            // The collector's base URL; the traces path is appended.
            "tracing.endpoint": Setting(alternative: .string("http://collector.example:4318"), expected: Setting.tracesURL) { c, _ in
                .text(c.tracing.endpoint)
            },
            // Percent-encoded values, decoded.
            "tracing.headers": Setting(alternative: .string("x-token=abc"), expected: Setting.percentDecoded) { c, _ in
                .text(c.tracing.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ","))
            },
            "tracing.sampler": Setting(alternative: .string("always_on")) { c, _ in .text(c.tracing.sampler.rawValue) },
            "tracing.sampler_arg": Setting(alternative: .number(0.5)) { c, _ in .number(c.tracing.samplerRatio) },
            "tracing.service_name": Setting(alternative: .string("revoker-eu")) { c, _ in .text(c.tracing.serviceName) },
            "tracing.trust_caller_sampling": Setting(alternative: .bool(true)) { c, _ in .bool(c.tracing.trustCallerSampling) },

            // Documented: `false` answers 404 at /v1/apple/notifications.
            "apple_notifications.enabled": Setting(alternative: .bool(false)) { c, _ in .bool(c.appleNotifications != nil) },
            "apple_notifications.issuers": Setting(
                unordered: true,
                alternative: .array([.string("https://appleid.apple.com"), .string("https://account.apple.com")])
            ) { c, _ in .list(c.appleNotifications?.issuers) },
            "apple_notifications.clock_skew_seconds": Setting(alternative: .number(30)) { c, _ in
                c.appleNotifications.map { .seconds($0.clockSkew) } ?? .null
            },
            "apple_notifications.max_age_seconds": Setting(alternative: .number(3600)) { c, _ in
                c.appleNotifications.map { .seconds($0.maximumAge) } ?? .null
            },

            "http.host": Setting(alternative: .string("0.0.0.0")) { c, _ in .string(c.http.host) },
            "http.port": Setting(alternative: .number(9090)) { c, _ in .integer(c.http.port) },
            "http.max_body_bytes": Setting(alternative: .number(131_072)) { c, _ in .integer(c.http.maxBodyBytes) },
            "http.header_timeout_seconds": Setting(alternative: .number(4)) { c, _ in .seconds(c.http.headerTimeout) },
            "http.body_timeout_seconds": Setting(alternative: .number(12)) { c, _ in .seconds(c.http.bodyTimeout) },
            "http.idle_timeout_seconds": Setting(alternative: .number(90)) { c, _ in .seconds(c.http.idleTimeout) },
            "http.max_connections": Setting(alternative: .number(64)) { c, _ in .integer(c.http.maxConnections) },
            "http.database_timeout_seconds": Setting(alternative: .number(2)) { c, _ in .seconds(c.http.databaseTimeout) },
            "http.grant_exchange_wait_seconds": Setting(alternative: .number(1.5)) { c, _ in .seconds(c.http.grantExchangeWait) },
            "http.public_url": Setting(alternative: .string("https://deletion.example.org")) { c, _ in
                .text(c.http.publicURL?.absoluteString)
            },
            "http.api_keys[].name": Setting { c, entry in .text(apiKey(c, entry)?.name) },
            "http.api_keys[].sha256": Setting { c, entry in
                .text(apiKey(c, entry).map { Data($0.sha256).map { String(format: "%02x", $0) }.joined() })
            },
            "http.api_keys[].scopes": Setting(unordered: true) { c, entry in .list(apiKey(c, entry)?.scopes.map(\.rawValue)) },
            // Left out: every app (nil), not none.
            "http.api_keys[].client_ids": Setting(unordered: true) { c, entry in .list(apiKey(c, entry)?.clientIDs) },
            "http.ui.enabled": Setting(alternative: .bool(false)) { c, _ in .bool(c.http.ui != nil) },
            "http.ui.public_url": Setting(alternative: .string("https://compliance.example.org")) { c, _ in
                .text(c.http.ui?.publicURL?.absoluteString)
            },
            "http.ui.session_hours": Setting(alternative: .number(2)) { c, _ in
                c.http.ui.map { .number(JSON.seconds($0.sessionLifetime).doubleValue / 3600) } ?? .null
            },
            "http.ui.idle_minutes": Setting(alternative: .number(45)) { c, _ in
                c.http.ui.map { .number(JSON.seconds($0.idleTimeout).doubleValue / 60) } ?? .null
            },
        ]
    }
}

/// A key of the file with its value, and the object holding it.
private struct Leaf {
    let path: [Step]
    let value: JSON
    let entry: [String: JSON]
    var pattern: String { path.pattern }
    var text: String { path.text }
}

/// The settings of `json`: keys `mapped` (by pattern) are leaves even when their value is a list
/// or an object; other objects, and lists of objects, are walked into; any other value is a
/// leaf too, which the caller reports as unmapped.
private func leaves(of json: JSON, mapped: Set<String>, path: [Step] = []) -> [Leaf] {
    guard let members = json.members else { return [] }
    var found: [Leaf] = []
    for (key, value) in members.sorted(by: { $0.key < $1.key }) {
        let here = path + [.key(key)]
        if mapped.contains(here.pattern) {
            found.append(Leaf(path: here, value: value, entry: members))
        } else if value.members != nil {
            found += leaves(of: value, mapped: mapped, path: here)
        } else if case .array(let items) = value, !items.isEmpty, items.allSatisfy({ $0.members != nil }) {
            for (index, item) in items.enumerated() { found += leaves(of: item, mapped: mapped, path: here + [.index(index)]) }
        } else {
            found.append(Leaf(path: here, value: value, entry: members))
        }
    }
    return found
}

/// The objects in lists of `json` (apps, webhooks, API keys…), with their place.
private func arrayEntries(of json: JSON, path: [Step] = []) -> [(pattern: String, text: String, object: [String: JSON])] {
    switch json {
    case .object(let members):
        return members.sorted(by: { $0.key < $1.key }).flatMap { arrayEntries(of: $0.value, path: path + [.key($0.key)]) }
    case .array(let items):
        return items.enumerated().flatMap { index, item in
            let here = path + [.index(index)]
            return (item.members.map { [(here.pattern, here.text, $0)] } ?? []) + arrayEntries(of: item, path: here)
        }
    default:
        return []
    }
}

// MARK: - The environment variables

/// Every variable Revoker reads: the assembly's and each provider's.
private let knownVariables = Set(RevokerConfiguration.variableNames)

/// The names in the first column of docs/operations.md's table of variables (the one with `DATABASE_URL`).
private func documentedVariables() throws -> [String] {
    let lines = try Documentation.read("docs/operations.md").components(separatedBy: "\n")
    guard let anchor = lines.firstIndex(where: { $0.hasPrefix("| `\(RevokerConfiguration.Variable.databaseURL)` |") }) else {
        Issue.record("docs/operations.md has no table row for DATABASE_URL.")
        return []
    }
    var start = anchor
    while start > 0, lines[start - 1].hasPrefix("|") { start -= 1 }
    var end = anchor
    while end + 1 < lines.count, lines[end + 1].hasPrefix("|") { end += 1 }
    var names: [String] = []
    for line in lines[start...end] {
        guard let cell = line.split(separator: "|").first else { continue }
        for match in cell.matches(of: #/`([A-Z][A-Z0-9_]*)`/#) where !names.contains(String(match.output.1)) {
            names.append(String(match.output.1))
        }
    }
    return names
}

/// One documented variable: the environment that sets it (with its companions), and what the
/// configuration then holds.
private struct VariableCase {
    var environment: [String: String]
    var read: (RevokerConfiguration) -> JSON
    var expected: JSON
    /// What the variable satisfies, so loading with these needs must succeed.
    var needs: RevokerConfiguration.Needs = []
    /// Whether the example's file sets something else that the variable replaces (false where it
    /// adds, as a second app).
    var overridesFile = true
    /// Top-level keys added to the example's file, so that it sets what the variable overrides.
    var file: [String: JSON] = [:]
    /// Set alone, without its companions, it is refused naming these.
    var lacking: [String] = []

    static func all(_ materials: Materials) throws -> [String: VariableCase] {
        typealias V = RevokerConfiguration.Variable
        typealias A = AppleSettings.Variable
        typealias G = GoogleSettings.Variable
        typealias F = FacebookSettings.Variable
        // The example's apps, which the environment's replace.
        let appleID = "com.example.web"
        let googleID = "123456789012-web.apps.googleusercontent.com"
        let facebookID = "1234567890123456"

        let appleKey = try LocalAppFiles(clientID: appleID, teamID: "ENVTEAM001", keyID: "ENVKEY0001", directory: materials.directory)
        let apple = [A.clientID: appleID, A.teamID: appleKey.teamID, A.keyID: appleKey.keyID, A.privateKeyFile: appleKey.privateKeyFile]
        let otherApple = try LocalAppFiles(clientID: "com.example.env", teamID: "ENVTEAM001", keyID: "ENVKEY0002", directory: materials.directory)
        let otherAppleEnvironment = [
            A.clientID: otherApple.clientID, A.teamID: otherApple.teamID, A.keyID: otherApple.keyID, A.privateKeyFile: otherApple.privateKeyFile,
        ]
        let googleSecret = try materials.googleSecretFile(clientID: googleID)
        let google = [G.clientID: googleID, G.clientSecretFile: googleSecret.path]
        // The plain form of a secret file: the secret alone.
        let otherGoogle = try LocalGoogleAppFiles(clientID: "987654321098-env.apps.googleusercontent.com", directory: materials.directory)
        let facebookSecret = try materials.facebookSecretFile(appID: facebookID)
        let facebook = [F.appID: facebookID, F.appSecretFile: facebookSecret.path]
        let otherFacebook = try LocalFacebookAppFiles(appID: "6543210987654321", directory: materials.directory)
        let signingKey = try materials.auditSigningKeyFile()
        let witness = materials.directory.appendingPathComponent("env-witness").path
        try FileManager.default.createDirectory(atPath: witness, withIntermediateDirectories: true)
        let trustRoots = try materials.trustRootsFile(count: 1)

        return [
            V.databaseURL: VariableCase(
                environment: [V.databaseURL: "postgres://env:pw@127.0.0.1:5432/env_db"],
                read: { .string($0.databaseURL) },
                expected: .string("postgres://env:pw@127.0.0.1:5432/env_db"),
                needs: .database
            ),
            V.sealingKeysFile: VariableCase(
                environment: [V.sealingKeysFile: try materials.sealingKeysFile(keyID: "env1")],
                read: { .string($0.keyring.currentKeyID) },
                expected: .string("env1"),
                needs: .keyring
            ),
            V.intakeKeysFile: VariableCase(
                environment: [V.intakeKeysFile: try materials.intakeKeysFile([try sharedIntakeKeys.get().1])],
                read: { .array($0.intakeKeys.map { .string($0.id) }) },
                expected: .array([.string(try sharedIntakeKeys.get().1.id)])
            ),
            A.clientID: VariableCase(
                environment: otherAppleEnvironment,
                read: { .bool($0.apps[otherApple.clientID] != nil) },
                expected: .bool(true),
                needs: .apps,
                overridesFile: false,
                lacking: [A.teamID, A.keyID, A.privateKeyFile]
            ),
            A.teamID: VariableCase(
                environment: apple,
                read: { .text($0.apps[appleID]?.apple.teamID) },
                expected: .string("ENVTEAM001"),
                lacking: [A.clientID, A.keyID, A.privateKeyFile]
            ),
            A.keyID: VariableCase(
                environment: apple,
                read: { .text($0.apps[appleID]?.apple.keyID) },
                expected: .string("ENVKEY0001"),
                lacking: [A.clientID, A.teamID, A.privateKeyFile]
            ),
            A.privateKeyFile: VariableCase(
                environment: apple,
                read: { .text($0.apps[appleID]?.apple.signingKey.publicKeyPEM) },
                expected: .string(appleKey.publicKeyPEM),
                lacking: [A.clientID, A.teamID, A.keyID]
            ),
            A.redirectURI: VariableCase(
                environment: apple.merging([A.redirectURI: "https://env.example.com/auth/apple"]) { $1 },
                read: { .text($0.apps[appleID]?.defaultRedirectURI) },
                expected: .string("https://env.example.com/auth/apple")
            ),
            A.baseURL: VariableCase(
                environment: [A.baseURL: "http://127.0.0.1:9"],
                read: { .string($0.appleBaseURL) },
                expected: .string("http://127.0.0.1:9")
            ),
            G.clientID: VariableCase(
                environment: [G.clientID: otherGoogle.clientID, G.clientSecretFile: otherGoogle.clientSecretFile],
                read: { .text($0.googleApps[otherGoogle.clientID].map { fingerprint(ofSecret: $0.clientSecret.value) }) },
                expected: .string(fingerprint(ofSecret: otherGoogle.clientSecret)),
                needs: .apps,
                overridesFile: false,
                lacking: [G.clientSecretFile]
            ),
            G.clientSecretFile: VariableCase(
                environment: google,
                read: { .text($0.googleApps[googleID].map { fingerprint(ofSecret: $0.clientSecret.value) }) },
                expected: googleSecret.fingerprint,
                lacking: [G.clientID]
            ),
            G.audiences: VariableCase(
                environment: google.merging([
                    G.audiences: "123456789012-tv.apps.googleusercontent.com, 123456789012-watch.apps.googleusercontent.com"
                ]) { $1 },
                read: { $0.googleApps[googleID].map { .array($0.audiences.map(JSON.string)) } ?? .null },
                expected: .array(
                    [googleID, "123456789012-tv.apps.googleusercontent.com", "123456789012-watch.apps.googleusercontent.com"].map(JSON.string)
                )
            ),
            G.redirectURI: VariableCase(
                environment: google.merging([G.redirectURI: "https://env.example.com/auth/google"]) { $1 },
                read: { .text($0.googleApps[googleID]?.defaultRedirectURI) },
                expected: .string("https://env.example.com/auth/google")
            ),
            G.oauthBaseURL: VariableCase(
                environment: [G.oauthBaseURL: "http://127.0.0.1:9/google"],
                read: { .string($0.google.oauthBaseURL) },
                expected: .string("http://127.0.0.1:9/google")
            ),
            G.certsURL: VariableCase(
                environment: [G.certsURL: "http://127.0.0.1:9/google/oauth2/v3/certs"],
                read: { .string($0.google.certsURL) },
                expected: .string("http://127.0.0.1:9/google/oauth2/v3/certs")
            ),
            G.riscConfigurationURL: VariableCase(
                environment: [G.riscConfigurationURL: "http://127.0.0.1:9/google/.well-known/risc-configuration"],
                read: { .string($0.google.riscConfigurationURL) },
                expected: .string("http://127.0.0.1:9/google/.well-known/risc-configuration")
            ),
            F.appID: VariableCase(
                environment: [F.appID: otherFacebook.appID, F.appSecretFile: otherFacebook.appSecretFile],
                read: { .text($0.facebookApps[otherFacebook.appID].map { fingerprint(ofSecret: $0.secret.value) }) },
                expected: .string(fingerprint(ofSecret: otherFacebook.appSecret)),
                needs: .apps,
                overridesFile: false,
                lacking: [F.appSecretFile]
            ),
            F.appSecretFile: VariableCase(
                environment: facebook,
                read: { .text($0.facebookApps[facebookID].map { fingerprint(ofSecret: $0.secret.value) }) },
                expected: facebookSecret.fingerprint,
                lacking: [F.appID]
            ),
            F.graphBaseURL: VariableCase(
                environment: [F.graphBaseURL: "http://127.0.0.1:9/facebook"],
                read: { .string($0.facebook.graphBaseURL) },
                expected: .string("http://127.0.0.1:9/facebook")
            ),
            F.graphVersion: VariableCase(
                environment: [F.graphVersion: "v24.0"],
                read: { .string($0.facebook.graphVersion) },
                expected: .string("v24.0")
            ),
            F.limitedLoginKeysURL: VariableCase(
                environment: [F.limitedLoginKeysURL: "http://127.0.0.1:9/facebook/.well-known/oauth/openid/jwks/"],
                read: { .string($0.facebook.limitedLoginKeysURL) },
                expected: .string("http://127.0.0.1:9/facebook/.well-known/oauth/openid/jwks/")
            ),
            F.limitedLoginUninstallURL: VariableCase(
                environment: [F.limitedLoginUninstallURL: "http://127.0.0.1:9/facebook/platform/uninstall/"],
                read: { .string($0.facebook.limitedLoginUninstallURL) },
                expected: .string("http://127.0.0.1:9/facebook/platform/uninstall/")
            ),
            V.extraTrustRootsFile: VariableCase(
                environment: [V.extraTrustRootsFile: trustRoots],
                read: { .string("\($0.extraTrustRootsFile ?? "none"): \($0.extraTrustRoots.count) certificate(s)") },
                expected: .string("\(trustRoots): 1 certificate(s)"),
                file: ["extra_trust_roots_file": .string(try materials.trustRootsFile(count: 2))]
            ),
            V.httpHost: VariableCase(environment: [V.httpHost: "0.0.0.0"], read: { .string($0.http.host) }, expected: .string("0.0.0.0")),
            V.httpPort: VariableCase(environment: [V.httpPort: "1234"], read: { .integer($0.http.port) }, expected: .number(1234)),
            V.auditSigningKeyFile: VariableCase(
                environment: [V.auditSigningKeyFile: signingKey.path],
                read: { .text($0.audit.signingKey?.publicKey.keyID) },
                expected: signingKey.fingerprint
            ),
            V.auditWitnessPath: VariableCase(
                environment: [V.auditWitnessPath: witness],
                read: { .text($0.audit.witnessPath) },
                expected: .string(witness)
            ),
        ]
    }
}

// MARK: - Files

/// Two intake keys for the whole run: RSA keys take a while to make.
private let sharedIntakeKeys = Result { try (IntakeKey.generate(), IntakeKey.generate()) }

/// A temporary directory of real key files, made with the project's own APIs, and what each
/// file holds (as the configuration's readings show it).
private final class Materials {
    let directory: URL
    /// By path: what the file holds, as a `Setting` reads it from the loaded configuration.
    private(set) var fingerprints: [String: JSON] = [:]

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// Writes `json` to a new file and returns its path.
    func write(_ json: JSON) throws -> String {
        let path = directory.appendingPathComponent("revoker-\(UUID().uuidString).json").path
        try json.encoded().write(to: URL(fileURLWithPath: path))
        return path
    }

    /// `deploy/revoker.example.json`, every file it names replaced by a real one.
    func example() throws -> JSON { try materialize(try exampleDocument()) }

    /// What a key naming files should read: the fingerprints of the files written for it.
    func expected(for leaf: Leaf, setting: Setting) -> JSON {
        guard case .key(let key) = leaf.path.last, namesFile(key) else { return setting.expected?(leaf.value, leaf.entry) ?? leaf.value }
        func fingerprint(_ value: JSON) -> JSON { value.stringValue.flatMap { fingerprints[$0] } ?? .string("no file was written for \(value)") }
        if case .array(let items) = leaf.value { return .array(items.map(fingerprint)) }
        return fingerprint(leaf.value)
    }

    private func materialize(_ json: JSON, path: [Step] = []) throws -> JSON {
        switch json {
        case .object(let members):
            var result: [String: JSON] = [:]
            for (key, value) in members {
                let here = path + [.key(key)]
                if namesFile(key) {
                    if case .array(let items) = value {
                        var files: [JSON] = []
                        for _ in items { files.append(.string(try file(for: here, in: members))) }
                        result[key] = .array(files)
                    } else {
                        result[key] = .string(try file(for: here, in: members))
                    }
                } else {
                    result[key] = try materialize(value, path: here)
                }
            }
            return .object(result)
        case .array(let items):
            var result: [JSON] = []
            for (index, item) in items.enumerated() { result.append(try materialize(item, path: path + [.index(index)])) }
            return .array(result)
        default:
            return json
        }
    }

    /// A real file for the setting at `path` (in `entry`), of the content it names.
    private func file(for path: [Step], in entry: [String: JSON]) throws -> String {
        switch path.pattern {
        case "sealing_keys_file":
            return try sealingKeysFile(keyID: "k2025")
        case "intake_keys_file":
            return try intakeKeysFile([try sharedIntakeKeys.get().0])
        case "extra_trust_roots_file":
            return try trustRootsFile(count: 1)
        case "apps[].private_key_file":
            let app = try LocalAppFiles(
                clientID: entry["client_id"]?.stringValue ?? "",
                teamID: entry["team_id"]?.stringValue ?? "",
                keyID: entry["key_id"]?.stringValue ?? "",
                directory: directory
            )
            fingerprints[app.privateKeyFile] = .string(app.publicKeyPEM)
            return app.privateKeyFile
        case "google.apps[].client_secret_file":
            return try googleSecretFile(clientID: entry["client_id"]?.stringValue ?? "").path
        case "facebook.apps[].app_secret_file":
            return try facebookSecretFile(appID: entry["app_id"]?.stringValue ?? "").path
        case "webhooks[].secret_file":
            let text = WebhookSecret.generate()
            guard let secret = WebhookSecret(text) else { throw ContractError("WebhookSecret.generate() made an unreadable secret") }
            return try secretFile(text + "\n", named: "webhook-secret", fingerprint: .string(fingerprint(ofWebhookSecret: secret)))
        case "audit.signing_key_file":
            return try auditSigningKeyFile().path
        case "audit.public_key_files":
            let key = AuditSigningKey().publicKey
            return try secretFile(key.pemRepresentation + "\n", named: "audit-public-key.pem", fingerprint: .string(key.keyID))
        case "audit.witness_path":
            let witnesses = directory.appendingPathComponent("witness-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: witnesses, withIntermediateDirectories: true)
            let path = witnesses.appendingPathComponent("checkpoints.jsonl").path
            fingerprints[path] = .string(path)
            return path
        default:
            throw ContractError("The example's \(path.text) names a file this test cannot make: teach Materials.file(for:in:) its content.")
        }
    }

    func sealingKeysFile(keyID: String) throws -> String {
        try secretFile(try CredentialKeyring.generateEntry(keyID: keyID) + "\n", named: "sealing-keys", fingerprint: .string(keyID))
    }

    func intakeKeysFile(_ keys: [IntakeKey]) throws -> String {
        try secretFile(
            keys.map { $0.pemRepresentation + "\n" }.joined(),
            named: "intake-keys.pem",
            fingerprint: .array(keys.map { .string($0.id) })
        )
    }

    func trustRootsFile(count: Int) throws -> String {
        var pem = ""
        for _ in 0..<count { pem += try SandboxTLS().authorityPEM + "\n" }
        let path = directory.appendingPathComponent("trust-roots-\(UUID().uuidString).pem").path
        try Data(pem.utf8).write(to: URL(fileURLWithPath: path))
        fingerprints[path] = .string("\(path): \(count) certificate(s)")
        return path
    }

    /// The client's JSON as Google Cloud Console downloads it.
    func googleSecretFile(clientID: String) throws -> (path: String, fingerprint: JSON) {
        let app = try LocalGoogleAppFiles(clientID: clientID, directory: directory)
        let download: JSON = .object([
            "web": .object([
                "client_id": .string(clientID), "client_secret": .string(app.clientSecret), "project_id": .string("revoker-contract"),
                "token_uri": .string("https://oauth2.googleapis.com/token"),
            ])
        ])
        let mark = JSON.string(fingerprint(ofSecret: app.clientSecret))
        return (try secretFile(String(decoding: try download.encoded(), as: UTF8.self), named: "google-client-secret.json", fingerprint: mark), mark)
    }

    /// The app secret alone (32 hex digits), as the App Dashboard shows it.
    func facebookSecretFile(appID: String) throws -> (path: String, fingerprint: JSON) {
        let app = try LocalFacebookAppFiles(appID: appID, directory: directory)
        let mark = JSON.string(fingerprint(ofSecret: app.appSecret))
        return (try secretFile(app.appSecret + "\n", named: "facebook-app-secret", fingerprint: mark), mark)
    }

    func auditSigningKeyFile() throws -> (path: String, fingerprint: JSON) {
        let key = AuditSigningKey()
        let mark = JSON.string(key.publicKey.keyID)
        return (try secretFile(key.pemRepresentation + "\n", named: "audit-signing-key.pem", fingerprint: mark), mark)
    }

    /// Writes `text` readable by its owner only, and notes what it holds.
    private func secretFile(_ text: String, named name: String, fingerprint: JSON) throws -> String {
        let path = directory.appendingPathComponent("\(UUID().uuidString)-\(name)").path
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ContractError("cannot write \(path)")
        }
        fingerprints[path] = fingerprint
        return path
    }
}

/// `deploy/revoker.example.json` as it is.
private func exampleDocument() throws -> JSON {
    let url = PrivatePostgres.packageRoot.appendingPathComponent("deploy/revoker.example.json")
    return try JSONDecoder().decode(JSON.self, from: Data(contentsOf: url))
}

/// Whether `key` names a file or directory, which the example's placeholders cannot be.
private func namesFile(_ key: String) -> Bool { key.hasSuffix("_file") || key.hasSuffix("_files") || key == "witness_path" }

/// A Google client secret or a Facebook app secret as it may be printed: its SHA-256.
private func fingerprint(ofSecret secret: String) -> String {
    "sha256:" + SHA256.hash(data: Data(secret.utf8)).map { String(format: "%02x", $0) }.joined()
}

/// A webhook secret as it may be printed: its signature of a fixed message.
private func fingerprint(ofWebhookSecret secret: WebhookSecret) -> String {
    secret.signature(id: "msg_contract", timestamp: 0, body: Array("{}".utf8))
}

private func isOneLine(_ message: String) -> Bool { !message.isEmpty && !message.contains(where: \.isNewline) }

private func keys(of json: JSON?) -> Set<String> { Set((json?.members ?? [:]).keys) }

private struct ContractError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - JSON

/// A step of a path into a JSON document.
private enum Step: Hashable {
    case key(String)
    case index(Int)
}

extension [Step] {
    /// `apps[].team_id`: the path with its indices left out, as the settings are listed.
    fileprivate var pattern: String { render { _ in "[]" } }
    /// `apps[1].team_id`.
    fileprivate var text: String { render { "[\($0)]" } }

    private func render(_ index: (Int) -> String) -> String {
        var text = ""
        for step in self {
            switch step {
            case .key(let key): text += (text.isEmpty ? "" : ".") + key
            case .index(let value): text += index(value)
            }
        }
        return text
    }
}

/// A JSON value, read and written without Foundation's number-or-boolean ambiguity.
private enum JSON: Codable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value) where value == value.rounded() && abs(value) < 1e15: try container.encode(Int64(value))
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    var description: String { (try? encoded()).map { String(decoding: $0, as: UTF8.self) } ?? "?" }

    static func integer(_ value: some BinaryInteger) -> JSON { .number(Double(value)) }
    static func text(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }
    static func list(_ values: (some Sequence<String>)?) -> JSON { values.map { .array($0.sorted().map(JSON.string)) } ?? .null }
    static func seconds(_ duration: Duration) -> JSON {
        .number(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    var members: [String: JSON]? { if case .object(let members) = self { members } else { nil } }
    var items: [JSON] { if case .array(let items) = self { items } else { [] } }
    var stringValue: String? { if case .string(let text) = self { text } else { nil } }
    var doubleValue: Double { if case .number(let number) = self { number } else { .nan } }
    subscript(key: String) -> JSON? { members?[key] }

    func value(at path: some Collection<Step>) -> JSON? {
        guard let first = path.first else { return self }
        switch (self, first) {
        case (.object(let members), .key(let key)): return members[key]?.value(at: path.dropFirst())
        case (.array(let items), .index(let index)) where items.indices.contains(index): return items[index].value(at: path.dropFirst())
        default: return nil
        }
    }

    /// Sets `value` at `path`, making the objects on the way.
    mutating func set(_ value: JSON, at path: ArraySlice<Step>) {
        guard let first = path.first else {
            self = value
            return
        }
        switch (self, first) {
        case (.object(var members), .key(let key)):
            var child = members[key] ?? .object([:])
            child.set(value, at: path.dropFirst())
            members[key] = child
            self = .object(members)
        case (.array(var items), .index(let index)) where items.indices.contains(index):
            items[index].set(value, at: path.dropFirst())
            self = .array(items)
        default:
            Issue.record("cannot set \(Array(path).text) in \(self)")
        }
    }
}

/// Equal as configuration values: numbers within rounding, lists as sets when `unordered`.
private func same(_ a: JSON, _ b: JSON, unordered: Bool = false) -> Bool {
    switch (a, b) {
    case (.number(let x), .number(let y)):
        return abs(x - y) <= 1e-9 * max(1, abs(x), abs(y))
    case (.array(var xs), .array(var ys)):
        if unordered {
            xs.sort { $0.description < $1.description }
            ys.sort { $0.description < $1.description }
        }
        return xs.count == ys.count && zip(xs, ys).allSatisfy { same($0, $1) }
    default:
        return a == b
    }
}
