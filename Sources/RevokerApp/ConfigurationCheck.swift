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
        var sealing: [String: Any] = ["current_key_id": configuration.keyring.currentKeyID, "key_ids": configuration.keyring.keyIDs]
        if !configuration.databaseURL.isEmpty {
            let (reachable, current, detail, usage) = await Self.checkDatabase(configuration, logger: logger)
            database["reachable"] = reachable
            database["migrations_current"] = current ?? NSNull()
            if let detail {
                database["problem"] = detail
                problems.append("database: \(detail)")
            }
            if let usage {
                sealing["in_use"] = Dictionary(
                    uniqueKeysWithValues: usage.keyIDs.map { ($0, ["grants": usage.grants[$0] ?? 0, "requests": usage.requests[$0] ?? 0]) }
                )
                for missing in usage.keyIDs where !configuration.keyring.keyIDs.contains(missing) {
                    problems.append("sealing keys: stored rows are sealed under key \(missing), which the sealing keys file lacks")
                }
            }
        }

        var report: [String: Any] = [
            "ok": problems.isEmpty,
            "sealing_keys": sealing,
            "database": database,
        ]
        for section in reports.flatMap(\.sections) { report[section.key] = section.value.foundationObject }
        let json = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return Report(json: json, problems: problems, appCount: reports.map(\.appCount).reduce(0, +))
    }

    /// Whether the database answers, whether its migrations are current, and (when they are)
    /// which sealing keys seal its rows.
    private static func checkDatabase(
        _ configuration: RevokerConfiguration,
        logger: Logger
    ) async -> (reachable: Bool, current: Bool?, problem: String?, usage: CredentialRotation.Usage?) {
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let app = try await RevokerApp(configuration: configuration, logger: quiet)
            return try await app.withRunning(waitForStartup: false) { running in
                do {
                    try await running.app.startup.reach()
                } catch let error as RevokerAppError {
                    return (false, nil, error.message, nil)
                }
                do {
                    let current = try await running.app.startup.schemaIsCurrent()
                    guard current else { return (true, false, "the schema is not current: run `revoker migrate`", nil) }
                    let usage = try? await CredentialRotation(client: running.database, sealer: configuration.sealer, logger: quiet).usage()
                    return (true, true, nil, usage)
                } catch let error as RevokerAppError {
                    return (true, nil, error.message, nil)
                }
            }
        } catch {
            return (false, nil, "\(error)", nil)
        }
    }
}
