import ArgumentParser
import Logging
import RevokerApp
import RevokerWorker
import UnixSignals

/// Worker settings that can be overridden on the command line.
struct WorkerOptions: ParsableArguments {
    @Option(help: "Requests processed at once (overrides worker.concurrency).")
    var concurrency: Int?

    @Option(
        name: .customLong("max-attempts"),
        help: "Attempts before a request ends exhausted, for this run's retries (overrides worker.max_attempts)."
    )
    var maxAttempts: Int?

    func validate() throws {
        if let concurrency, !(1...1024).contains(concurrency) { throw ValidationError("--concurrency must be between 1 and 1024.") }
        if let maxAttempts, !(1...100).contains(maxAttempts) { throw ValidationError("--max-attempts must be between 1 and 100.") }
    }

    func apply(to settings: inout WorkerSettings) {
        if let concurrency {
            settings.concurrency = concurrency
            settings.batchSize = min(settings.batchSize, concurrency)
        }
        if let maxAttempts { settings.maxAttempts = maxAttempts }
    }
}

/// Runs the worker until it ends (drain) or a SIGTERM/SIGINT shuts it down gracefully.
func runWorker(_ configuration: RevokerConfiguration, mode: RevocationWorker.Mode, logger: Logger) async throws -> WorkerReport {
    try await reportingStartupProblems {
        let app = try await RevokerApp(configuration: configuration, parts: .worker, workerMode: mode, logger: logger)
        try await app.run(gracefulShutdownSignals: [.sigterm, .sigint])
        guard let worker = app.worker else { throw RevokerAppError(.configuration, "the worker was not built") }
        return worker.report()
    }
}
