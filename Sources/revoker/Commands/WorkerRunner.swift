import AppleSignIn
import ArgumentParser
import Logging
import PostgresNIO
import RevokerStore
import RevokerWorker
import ServiceLifecycle
import UnixSignals

/// Worker settings that can be overridden on the command line.
struct WorkerOptions: ParsableArguments {
    @Option(help: "Requests processed at once (overrides worker.concurrency).")
    var concurrency: Int?

    @Option(name: .customLong("max-attempts"), help: "Attempts before a request ends exhausted, for this run's retries (overrides worker.max_attempts).")
    var maxAttempts: Int?

    func validate() throws {
        if let concurrency, !(1...1024).contains(concurrency) { throw ValidationError("--concurrency must be between 1 and 1024.") }
        if let maxAttempts, !(1...100).contains(maxAttempts) { throw ValidationError("--max-attempts must be between 1 and 100.") }
    }

    func apply(to settings: inout RevokerConfiguration.Worker) {
        if let concurrency {
            settings.concurrency = concurrency
            settings.batchSize = min(settings.batchSize, concurrency)
        }
        if let maxAttempts { settings.maxAttempts = maxAttempts }
    }
}

/// Runs the worker until it ends (drain) or a SIGTERM/SIGINT shuts it down gracefully.
func runWorker(_ configuration: RevokerConfiguration, mode: RevocationWorker.Mode, logger: Logger) async throws -> WorkerReport {
    try await withDatabase(configuration, logger: logger) { database in
        guard try await Migrator(client: database, logger: logger).isCurrent() else {
            throw fail("The database schema is not current; run `revoker migrate` first.")
        }
        return try await withAppleClient(configuration, logger: logger) { client in
            let apps: AppleApps
            do {
                apps = try await AppleApps(configuration: configuration, client: client)
            } catch let error as AppleSignInError {
                throw fail(error.message)
            }
            let queue = RevocationQueue(client: database, sealer: CredentialSealer(keyring: configuration.keyring), logger: logger)
            let worker = RevocationWorker(queue: queue, apps: apps, settings: configuration.worker, mode: mode, logger: logger)
            let group = ServiceGroup(
                configuration: .init(
                    services: [.init(service: worker, successTerminationBehavior: .gracefullyShutdownGroup)],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger
                )
            )
            try await group.run()
            return worker.report()
        }
    }
}
