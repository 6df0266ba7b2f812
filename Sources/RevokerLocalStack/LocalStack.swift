import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import Logging
import RevokerApp
import RevokerProvider
import RevokerStore

/// Revoker's surroundings on one machine, without Apple: a scratch database with every
/// migration applied, the sandbox on a free port with the apps registered, their keys and a
/// configuration file written as an operator would, and that configuration loaded as
/// `revoker` loads it. The test harness and the benchmark stand on it.
public struct LocalStack: Sendable {
    /// The scratch database, dropped afterwards.
    public let database: ScratchDatabase
    /// The sandbox standing in for Apple.
    public let sandbox: RunningSandbox
    /// The keys and configuration file.
    public let files: LocalConfiguration
    /// The configuration loaded from ``files``, pointing at ``database`` and ``sandbox``.
    public let configuration: RevokerConfiguration

    /// The environment for a `revoker` process using this stack.
    public var environment: [String: String] {
        files.environment(databaseURL: database.url, sandbox: sandbox)
    }

    /// Sets the stack up, runs `body`, and takes it down (also when `body` throws).
    ///
    /// - Parameters:
    ///   - transport: how the sandbox is reached (by default as providers are: HTTPS, HTTP/2).
    ///   - apps: each provider's apps (client IDs), configured and registered with its sandbox.
    ///   - worker: `worker` settings for the configuration file.
    ///   - http: `http` settings for the configuration file.
    ///   - settings: further top-level settings for the configuration file (`webhooks`, …).
    ///   - sandbox: the sandbox's faults and lifetimes.
    ///   - google: the Google sandbox's.
    ///   - server: the PostgreSQL server to make the database on (default: `DATABASE_URL`).
    public static func with<T: Sendable>(
        transport: SandboxTransport = .https,
        apps: [ProviderName: [String]],
        worker: [String: any Sendable] = [:],
        http: [String: any Sendable] = [:],
        settings: [String: any Sendable] = [:],
        sandbox sandboxConfiguration: AppleSandbox.Configuration = .init(),
        google googleConfiguration: GoogleSandbox.Configuration = .init(),
        server: String? = nil,
        logger: Logger = Logger(label: "revoker.local", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ body: (LocalStack) async throws -> T
    ) async throws -> T {
        try await ScratchDatabase.withScratchDatabase(on: server, .migrated, logger: logger) { database in
            try await RunningSandbox.with(transport: transport, configuration: sandboxConfiguration, google: googleConfiguration) { sandbox in
                let files = try LocalConfiguration(apps: apps, worker: worker, http: http, settings: settings)
                defer { try? FileManager.default.removeItem(at: files.directory) }
                try await reportingStall("registering apps with the sandbox") { try await files.register(with: sandbox) }
                let configuration = try RevokerConfiguration.load(
                    file: files.configFile,
                    environment: files.environment(databaseURL: database.url, sandbox: sandbox)
                )
                // As `revoker migrate` would: the SQL path accepts these apps and encrypts to this intake key.
                try await reportingStall("publishing the SQL intake on \(database.name)") {
                    try await RevocationQueue(client: database.client, sealer: configuration.sealer, logger: logger)
                        .publishSQLIntake(apps: configuration.sqlApps)
                }
                return try await body(LocalStack(database: database, sandbox: sandbox, files: files, configuration: configuration))
            }
        }
    }
}
