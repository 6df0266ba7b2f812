import ArgumentParser
import Logging
import RevokerApp
import RevokerHTTP
import UnixSignals

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP API and, unless --no-worker, the worker in one process.",
        discussion: """
            The API (see /openapi.yaml) lets app backends enqueue deletions and compliance staff read the \
            audit trail with bearer API keys (http.api_keys in the configuration; `revoker api-key` makes \
            one). /healthz, /readyz and /metrics are open: keep them on a private network. Several replicas \
            can run at once: they share the queue through PostgreSQL. SIGTERM or SIGINT stops taking \
            requests and work, lets in-flight revocations finish within worker.shutdown_grace_seconds.

            Example:
              REVOKER_CONFIG=/etc/revoker/revoker.json revoker serve --host 0.0.0.0 --port 8080
            """
    )

    @OptionGroup var options: ConfigurationOptions
    @OptionGroup var worker: WorkerOptions

    @Option(help: "Address to listen on (default: http.host, else 127.0.0.1; $REVOKER_HTTP_HOST).")
    var host: String?

    @Option(help: "Port to listen on (default: http.port, else 8080; $REVOKER_HTTP_PORT).")
    var port: Int?

    @Flag(name: .customLong("no-worker"), help: "Serve the API only; run workers elsewhere (`revoker work`).")
    var noWorker = false

    func validate() throws {
        if let port, !(0...65_535).contains(port) { throw ValidationError("--port must be between 0 and 65535.") }
    }

    func run() async throws {
        var configuration = try loadConfiguration(options, needs: .all)
        worker.apply(to: &configuration.worker)
        if let host { configuration.http.host = host }
        if let port { configuration.http.port = port }
        let logger = CommandLogging.logger(
            label: "revoker.serve",
            level: options.logLevel,
            metadataProvider: configuration.tracing.loggingMetadataProvider
        )
        if configuration.http.apiKeys.isEmpty {
            logger.warning("No API keys are configured: every /v1 call will be refused (add http.api_keys; `revoker api-key` makes one)")
        }
        let host = configuration.http.host
        let withWorker = !noWorker
        try await reportingStartupProblems {
            let app = try await RevokerApp(
                configuration: configuration,
                parts: noWorker ? .api : [.api, .worker],
                onServerRunning: { port in
                    logger.notice("Serving the API", metadata: ["http.host": "\(host)", "http.port": "\(port)", "revoker.worker": "\(withWorker)"])
                },
                logger: logger
            )
            try await app.run(gracefulShutdownSignals: [.sigterm, .sigint])
        }
    }
}
