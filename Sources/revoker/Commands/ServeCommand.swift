import AppleSignIn
import ArgumentParser
import Logging
import Prometheus
import RevokerHTTP
import RevokerStore
import RevokerWorker
import ServiceLifecycle
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
        let logger = CommandLogging.logger(label: "revoker.serve", level: options.logLevel)
        if configuration.http.apiKeys.isEmpty {
            logger.warning("No API keys are configured: every /v1 call will be refused (add http.api_keys; `revoker api-key` makes one)")
        }
        try await withDatabase(configuration, logger: logger) { [configuration] database in
            guard try await Migrator(client: database, logger: logger).isCurrent() else {
                throw fail("The database schema is not current; run `revoker migrate` first.")
            }
            try await withAppleClient(configuration, logger: logger) { client in
                let registry = PrometheusCollectorRegistry()
                let metrics = RevokerMetrics(factory: PrometheusMetricsFactory(registry: registry))
                let api = RevokerAPI(database: database, configuration: configuration, registry: registry, metrics: metrics, logger: logger)
                var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: api.application())]
                if !noWorker {
                    let apps: AppleApps
                    do {
                        apps = try await AppleApps(configuration: configuration, client: client)
                    } catch let error as AppleSignInError {
                        throw fail(error.message)
                    }
                    let queue = RevocationQueue(client: database, sealer: CredentialSealer(keyring: configuration.keyring), logger: logger)
                    services.append(.init(service: RevocationWorker(queue: queue, apps: apps, settings: configuration.worker, metrics: metrics, logger: logger)))
                }
                logger.notice(
                    "Serving the API",
                    metadata: ["http.host": "\(configuration.http.host)", "http.port": "\(configuration.http.port)", "revoker.worker": "\(!noWorker)"]
                )
                let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
                try await group.run()
            }
        }
    }
}
