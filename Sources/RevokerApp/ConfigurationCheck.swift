import Foundation
import Logging
import RevokerProvider
import RevokerStore
import RevokerWorker

/// What `revoker check` finds: each registered provider's findings on its apps (Apple's: every
/// key loaded and a client secret signed, its header and claims decoded, never the signature),
/// optionally the providers' verdicts, the sealing keys and the database.
public enum ConfigurationCheck {
    /// The findings, as JSON for people and scripts, and one line per problem.
    public struct Report: Sendable {
        /// The findings as pretty-printed JSON.
        public let json: Data
        /// What failed, one line each; empty when all is well.
        public let problems: [String]
        /// How many apps were checked.
        public let appCount: Int
    }

    /// Checks every configured app; with `online`, asks each provider for its verdict on the
    /// app's own credentials (no grant is touched).
    public static func run(_ configuration: RevokerConfiguration, online: Bool, logger: Logger) async throws -> Report {
        var reports: [ProviderCheckReport] = []
        let clients = online ? configuration.makeProviderHTTPClients() : nil
        do {
            let context = configuration.providerContext(logger: logger)
            for provider in configuration.providers { reports.append(await provider.check(clients, context)) }
            try await clients?.shutdown()
        } catch {
            try? await clients?.shutdown()
            throw error
        }
        var problems = reports.flatMap(\.problems)
        var database: [String: Any] = ["configured": !configuration.databaseURL.isEmpty]
        if !configuration.databaseURL.isEmpty {
            let (reachable, current, detail) = await Self.checkDatabase(configuration, logger: logger)
            database["reachable"] = reachable
            database["migrations_current"] = current ?? NSNull()
            if let detail {
                database["problem"] = detail
                problems.append("database: \(detail)")
            }
        }

        var report: [String: Any] = [
            "ok": problems.isEmpty,
            "sealing_keys": ["current_key_id": configuration.keyring.currentKeyID, "key_ids": configuration.keyring.keyIDs],
            "database": database,
        ]
        for section in reports.flatMap(\.sections) { report[section.key] = section.value.foundationObject }
        let json = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return Report(json: json, problems: problems, appCount: reports.map(\.appCount).reduce(0, +))
    }

    /// Whether the database answers, and whether its migrations are current.
    private static func checkDatabase(
        _ configuration: RevokerConfiguration,
        logger: Logger
    ) async -> (reachable: Bool, current: Bool?, problem: String?) {
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let app = try await RevokerApp(configuration: configuration, logger: quiet)
            return try await app.withRunning(waitForStartup: false) { running in
                do {
                    try await running.app.startup.reach()
                } catch let error as RevokerAppError {
                    return (false, nil, error.message)
                }
                do {
                    let current = try await running.app.startup.schemaIsCurrent()
                    return (true, current, current ? nil : "the schema is not current: run `revoker migrate`")
                } catch let error as RevokerAppError {
                    return (true, nil, error.message)
                }
            }
        } catch {
            return (false, nil, "\(error)")
        }
    }
}
