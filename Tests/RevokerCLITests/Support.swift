import Foundation
import Logging
import PostgresNIO
import RevokerProvider
import RevokerStore
import Testing

@testable import RevokerLocalStack
@testable import RevokerTesting

/// A migrated test database, a configuration directory and the environment for `revoker`.
struct CLIFixture: Sendable {
    let database: ScratchDatabase
    let configuration: LocalConfiguration
    let environment: [String: String]

    static let logger = Logger(label: "revoker.cli-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Runs `body` with the test stack serving `apps`, its environment pointing `revoker`
    /// at `appleBaseURL` (by default an address where nothing answers).
    static func with<T: Sendable>(
        apps: [ProviderName: [String]] = [.apple: ["com.example.app"]],
        appleBaseURL: String = "http://127.0.0.1:9",
        _ body: (CLIFixture) async throws -> T
    ) async throws -> T {
        try await RevokerTestStack.with(apps: apps) { stack in
            let fixture = CLIFixture(
                database: stack.database,
                configuration: stack.files,
                environment: stack.files.environment(databaseURL: stack.database.url, baseURL: appleBaseURL)
            )
            return try await body(fixture)
        }
    }

    /// Runs `revoker arguments…` with the fixture's environment (plus `extra`).
    func run(_ arguments: [String], stdin: Data? = nil, extra: [String: String] = [:]) async throws -> RevokerProcess.Result {
        try await RevokerProcess.run(arguments, environment: environment.merging(extra) { $1 }, stdin: stdin)
    }

    /// Runs `revoker` with standard input read from a file rather than a pipe: input larger
    /// than the pipe buffer is read by `revoker` up to its limit, and the rest is never written.
    func run(_ arguments: [String], stdinFile: String) async throws -> RevokerProcess.Result {
        let handle = try RevokerProcess.Handle(
            executable: RevokerProcess.binary,
            arguments: arguments,
            environment: environment.merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 },
            stdinFile: stdinFile
        )
        do {
            try await eventually("revoker \(arguments.first ?? "") ends", every: .milliseconds(20)) { !handle.isRunning }
        } catch {
            handle.signal(SIGKILL)
            throw error
        }
        return RevokerProcess.Result(status: handle.terminationStatus, stdout: handle.output, stderr: handle.errors, signalled: handle.signalled)
    }

    /// Writes `text` to a new file in the configuration directory and returns its path.
    func write(_ text: String, name: String = UUID().uuidString) throws -> String {
        try configuration.write(text, name: name)
    }

    /// Number of revocation requests in the database.
    func requestCount() async throws -> Int {
        let rows = try await database.client.query("SELECT count(*)::int FROM revoker.revocation_requests", logger: Self.logger).collect()
        return try rows.first?.decode(Int.self) ?? -1
    }

    /// A queue on the test database, sealing with the configuration's keyring.
    func queue() throws -> RevocationQueue {
        let keys = try String(contentsOfFile: configuration.sealingKeysFile, encoding: .utf8)
        let intake = try IntakeKey(pemRepresentation: try String(contentsOfFile: configuration.intakeKeysFile, encoding: .utf8))
        return RevocationQueue(
            client: database.client,
            sealer: CredentialSealer(keyring: try CredentialKeyring(parsing: keys), intakeKeys: [intake]),
            logger: Self.logger
        )
    }

    /// Every private key's PEM body line, to search output for.
    var privateKeyLines: [String] {
        configuration.apps(LocalAppFiles.self).flatMap { app in
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
