import Foundation
import Logging
import PostgresNIO
import RevokerStore
import RevokerTesting
import Testing

/// A migrated test database, a configuration directory and the environment for `revoker`.
struct CLIFixture: Sendable {
    let database: TestDatabase
    let configuration: TestConfiguration
    let environment: [String: String]

    static let logger = Logger(label: "revoker.cli-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Runs `body` with a fresh migrated database and a configuration serving `clientIDs`.
    static func with<T: Sendable>(
        clientIDs: [String] = ["com.example.app"], appleBaseURL: String = "http://127.0.0.1:9", _ body: (CLIFixture) async throws -> T
    ) async throws -> T {
        try await TestDatabase.withTestDatabase { database in
            try await Migrator(client: database.client, logger: logger).migrate()
            let configuration = try TestConfiguration(clientIDs: clientIDs)
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let fixture = CLIFixture(
                database: database, configuration: configuration,
                environment: configuration.environment(databaseURL: database.url, appleBaseURL: appleBaseURL)
            )
            return try await body(fixture)
        }
    }

    /// Runs `revoker arguments…` with the fixture's environment (plus `extra`).
    func run(_ arguments: [String], stdin: Data? = nil, extra: [String: String] = [:]) async throws -> RevokerProcess.Result {
        try await RevokerProcess.run(arguments, environment: environment.merging(extra) { $1 }, stdin: stdin)
    }

    /// Writes `text` to a new file in the configuration directory and returns its path.
    func write(_ text: String, name: String = UUID().uuidString) throws -> String {
        let path = configuration.directory.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Number of revocation requests in the database.
    func requestCount() async throws -> Int {
        let rows = try await database.client.query("SELECT count(*)::int FROM revoker.revocation_requests", logger: Self.logger).collect()
        return try rows.first?.decode(Int.self) ?? -1
    }

    /// A queue on the test database, sealing with the configuration's keyring.
    func queue() throws -> RevocationQueue {
        let keys = try String(contentsOfFile: configuration.sealingKeysFile, encoding: .utf8)
        return RevocationQueue(client: database.client, sealer: CredentialSealer(keyring: try CredentialKeyring(parsing: keys)), logger: Self.logger)
    }

    /// Every private key's PEM body line, to search output for.
    var privateKeyLines: [String] {
        configuration.apps.flatMap { app in
            app.privateKeyPEM.split(whereSeparator: \.isNewline).map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 16 }
        }
    }
}

/// A random credential that looks like Apple's refresh tokens.
func randomToken() -> String {
    "r" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "") + ".0.abcd." + UUID().uuidString.prefix(8).lowercased()
}

/// Expects that none of `secrets` appears in what the process printed.
func expectNothingLeaked(_ result: RevokerProcess.Result, _ secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    for secret in secrets where !secret.isEmpty {
        #expect(!result.stdout.contains(secret), "stdout leaks a secret", sourceLocation: sourceLocation)
        #expect(!result.stderr.contains(secret), "stderr leaks a secret", sourceLocation: sourceLocation)
    }
}

/// Parses JSON output, failing the test with the output when it is not JSON.
func parseJSON(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
    do {
        return try JSONSerialization.jsonObject(with: Data(text.utf8))
    } catch {
        Issue.record("not JSON: \(text.prefix(2000))", sourceLocation: sourceLocation)
        throw error
    }
}
