import Foundation
import Logging
import PostgresNIO
import RevokerStore

/// A fresh, uniquely named PostgreSQL database for one test, demo or benchmark scenario,
/// dropped afterwards.
public struct ScratchDatabase: Sendable {
    /// What a scratch database holds when it is handed over.
    public enum Schema: Sendable {
        /// Nothing: for what migrates a database itself (the migrator's tests, `revoker migrate`,
        /// a command refusing an unmigrated database).
        case empty
        /// Every migration applied. On `DATABASE_URL`'s server the migrations run once per
        /// process, into a template that each database is copied from; on a server named
        /// explicitly (a test's own, which it stops and starts) they run in the database itself.
        case migrated
    }

    /// A running client connected to the database.
    public let client: PostgresClient
    /// The database's connection settings.
    public let configuration: PostgresClient.Configuration
    /// The database's URL (`postgres://...`).
    public let url: String
    /// The database name.
    public let name: String

    /// Reads `DATABASE_URL`, or throws an error that says how to provide one.
    public static func baseURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw RevokerStoreError(
                .invalidDatabaseURL,
                "DATABASE_URL is not set: run the tests as `scripts/with-postgres swift test`, or set DATABASE_URL=postgres://user@host:port/database"
            )
        }
        return url
    }

    /// Creates a database holding `schema`, runs `body` with a running client on it, then drops
    /// the database (also when `body` throws).
    public static func withScratchDatabase<Result: Sendable>(
        on server: String? = nil,
        _ schema: Schema = .empty,
        logger: Logger = Logger(label: "revoker.scratch", factory: { _ in SwiftLogNoOpLogHandler() }),
        _ body: (ScratchDatabase) async throws -> Result
    ) async throws -> Result {
        let baseURL = try server ?? self.baseURL()
        let template: String? =
            switch (schema, server) {
            case (.migrated, nil):
                try await reportingStall("making the migrated template") {
                    try await MigratedTemplate.shared.name(on: baseURL, logger: logger)
                }
            default: nil
            }
        var baseConfiguration = try PostgresClient.Configuration(url: baseURL)
        baseConfiguration.options.maximumConnections = 4
        let name = "revoker_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        guard var components = URLComponents(string: baseURL) else {
            throw RevokerStoreError(.invalidDatabaseURL, "invalid DATABASE_URL")
        }
        components.path = "/" + name
        let url = components.string ?? baseURL
        var configuration = baseConfiguration
        configuration.database = name
        configuration.options.maximumConnections = 40

        let admin = PostgresClient(configuration: baseConfiguration)
        return try await withClientRunning(admin, name: "the admin client of \(name)") {
            try await reportingStall("creating database \(name)") {
                let copy = template.map { " TEMPLATE \"\($0)\"" } ?? ""
                try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \"\(name)\"" + copy))
            }
            let client = PostgresClient(configuration: configuration)
            let result: Swift.Result<Result, any Error>
            do {
                result = .success(
                    try await withClientRunning(client, name: "the client of \(name)") {
                        if schema == .migrated && template == nil {
                            try await reportingStall("migrating \(name)") {
                                _ = try await Migrator(client: client, logger: logger).migrate()
                            }
                        }
                        return try await body(ScratchDatabase(client: client, configuration: configuration, url: url, name: name))
                    }
                )
            } catch {
                result = .failure(error)
            }
            try await reportingStall("dropping database \(name)") {
                try await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \"\(name)\" WITH (FORCE)"))
            }
            return try result.get()
        }
    }

    /// Runs `client` for the duration of `body`. Once `body` is done the client's `run()` is
    /// cancelled and given 15 s to return: PostgresNIO's has been seen never to return after a
    /// cancellation (every connection closed, the task suspended for good), which hung whole
    /// test runs. Past the limit it is left behind, and said so on standard error.
    static func withClientRunning<T>(_ client: PostgresClient, name: String, _ body: () async throws -> T) async throws -> T {
        let running = Task { await client.run() }
        let result: Swift.Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        running.cancel()
        if (try? await withDeadline(.seconds(15), { await running.value })) == nil {
            FileHandle.standardError.write(Data("stall: \(name) did not stop within 15 s; left behind\n".utf8))
        }
        return try result.get()
    }
}

extension ScratchDatabase {
    /// Makes another client for the same database; run it with `run()` in a task of yours.
    public func makeClient() -> PostgresClient {
        PostgresClient(configuration: self.configuration)
    }
}
