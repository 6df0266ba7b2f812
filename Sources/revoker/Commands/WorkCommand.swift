import ArgumentParser
import RevokerApp
import RevokerWorker

struct WorkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "work",
        abstract: "Run the long-lived worker: claim due requests and carry each through Apple until stopped.",
        discussion: """
            Wakes on new requests (LISTEN/NOTIFY) and polls as a fallback; several workers can share one \
            database. SIGTERM or SIGINT stops claiming, lets in-flight requests finish within \
            worker.shutdown_grace_seconds and hands back the rest.

            Example:
              DATABASE_URL=postgres://revoker@db/app REVOKER_CONFIG=/etc/revoker/revoker.json revoker work
            """
    )

    @OptionGroup var options: ConfigurationOptions
    @OptionGroup var worker: WorkerOptions

    func run() async throws {
        var configuration = try loadConfiguration(options, needs: .all)
        worker.apply(to: &configuration.worker)
        let logger = CommandLogging.logger(
            label: "revoker.worker",
            level: options.logLevel,
            metadataProvider: configuration.tracing.loggingMetadataProvider
        )
        _ = try await runWorker(configuration, mode: .continuous, logger: logger)
    }
}
