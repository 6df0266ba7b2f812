import AsyncHTTPClient
import CoreMetrics
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerHTTP
import RevokerProvider
import RevokerStore
import RevokerWebhooks
import RevokerWorker
import ServiceLifecycle

/// The steps ``RevokerApp/init(configuration:parts:workerMode:requireCurrentSchema:onServerRunning:logger:)``
/// takes, one part of the program each.
extension RevokerApp {
    typealias Entry = ServiceGroupConfiguration.ServiceConfiguration

    static func databaseSettings(_ configuration: RevokerConfiguration) throws -> PostgresClient.Configuration {
        do {
            return try configuration.databaseConfiguration()
        } catch let error as ConfigurationError {
            throw RevokerAppError(.configuration, error.message)
        }
    }

    static func raiseOpenFileLimit(_ configuration: RevokerConfiguration, parts: Parts, logger: Logger) {
        guard !parts.isEmpty else { return }
        OpenFileLimit.raise(
            need: OpenFileLimit.need(
                workerConcurrency: parts.contains(.worker) ? configuration.worker.concurrency : nil,
                apiConnections: parts.contains(.api) ? configuration.http.maxConnections : nil
            ),
            logger: logger
        )
    }

    static func startupCheck(
        _ configuration: RevokerConfiguration,
        settings: PostgresClient.Configuration,
        database: PostgresClient,
        queue: RevocationQueue,
        parts: Parts,
        requireCurrentSchema: Bool,
        logger: Logger
    ) -> StartupCheck {
        // A serving process makes the SQL path match its configuration; one-shot commands,
        // which may run with a partial configuration, leave it alone.
        let apps = configuration.sqlApps
        var publish: (@Sendable () async throws -> Void)?
        if !parts.isEmpty {
            publish = { @Sendable in try await queue.publishSQLIntake(apps: apps) }
        }
        return StartupCheck(
            database: database,
            place: "\(settings.host ?? "?"):\(settings.port ?? 0)",
            requireCurrentSchema: requireCurrentSchema,
            endpoint: try? DatabaseEndpoint(url: configuration.databaseURL),
            publish: publish,
            logger: logger
        )
    }

    /// Beside the API, parts record into the registry `/metrics` exports; without it, through the
    /// process's metrics system (a no-op unless bootstrapped), as nothing would read the registry.
    static func metricsFactory(_ parts: Parts, registry: PrometheusCollectorRegistry) -> any MetricsFactory {
        parts.contains(.api) ? PrometheusMetricsFactory(registry: registry) : MetricsSystem.factory
    }
}

extension RevokerApp {
    /// What every step of the assembly reads: the settings, the parts asked for, the database
    /// client, the queue over it, the check serving parts wait for, and where metrics go.
    struct Assembly {
        let configuration: RevokerConfiguration
        let parts: Parts
        let database: PostgresClient
        let queue: RevocationQueue
        let startup: StartupCheck
        let metrics: any MetricsFactory
        let logger: Logger

        /// The span exporter: only serving processes trace; one-shot commands do not.
        func tracing() throws -> [Entry] {
            guard !parts.isEmpty, let exporter = try TracingBootstrap.start(configuration.tracing, logger: logger) else { return [] }
            return [.init(service: exporter, serviceName: "tracing")]
        }

        /// One signer per serving process: what it signed is what the next checkpoint must extend.
        func auditSigner() throws -> AuditSigner? {
            do {
                return parts.isEmpty ? nil : try configuration.audit.signer()
            } catch {
                throw RevokerAppError(.configuration, "The audit witness cannot be read: \(error)")
            }
        }

        func auditCheckpoints(_ signer: AuditSigner?) -> [Entry] {
            guard let signer else { return [] }
            let checkpoints = AuditCheckpointService(
                checkpoints: AuditCheckpoints(client: database, logger: logger),
                signer: signer,
                interval: configuration.audit.checkpointInterval,
                metrics: metrics,
                logger: logger
            )
            return [.init(service: AfterStartup(check: startup, service: checkpoints), serviceName: "audit-checkpoints")]
        }

        /// Every serving process looks for the writes it acknowledged after the database fails over.
        func lostWriteWatch() -> [Entry] {
            guard !parts.isEmpty else { return [] }
            let watch = LostWriteWatch(queue: queue, actor: "revoker", logger: logger)
            return [.init(service: AfterStartup(check: startup, service: watch), serviceName: "lost-write-watch")]
        }

        /// One pool to the providers and one cache of each provider's keys for the worker's
        /// identity tokens, the API's notifications and the identity tokens requests carry; the pool
        /// joins `services`.
        func providers(services: inout [Entry]) async throws -> (providers: SignInProviders, inboxes: [any ProviderInbox]) {
            // An API without apps or messages to receive has nothing to ask a provider.
            let active = configuration.providers.contains { !$0.settings.clientIDs.isEmpty || $0.settings.receivesMessages }
            guard parts.contains(.worker) || (parts.contains(.api) && active) else {
                return (SignInProviders([]), RevokerConfiguration.plugins.flatMap(\.closedInboxes))
            }
            let clients = configuration.makeProviderHTTPClients()
            services.append(.init(service: HTTPClientService(clients: clients.all), serviceName: "provider-http-clients"))
            do {
                return try await RevokerApp.makeProviders(configuration, clients: clients, logger: logger)
            } catch {
                try? await clients.shutdown()
                throw error
            }
        }

        /// The worker, and its services: the webhook deliverer when webhooks are configured, then the worker.
        func worker(providers: SignInProviders, mode: RevocationWorker.Mode) -> (RevocationWorker, [Entry]) {
            let owner = RevocationWorker.defaultOwner()
            let worker = RevocationWorker(
                queue: queue,
                providers: providers,
                settings: configuration.worker,
                mode: mode,
                owner: owner,
                metrics: WorkerMetrics(factory: metrics),
                logger: logger
            )
            let draining = if case .drain = mode { true } else { false }
            // Events go out from every worker process; an endpoint's lease keeps them in order.
            let (services, workFinished) =
                configuration.webhooks.isEmpty
                ? ([], nil)
                : webhookDeliverer(owner: owner, draining: draining)
            let ending: Entry.TerminationBehavior = !draining ? .cancelGroup : workFinished == nil ? .gracefullyShutdownGroup : .ignore
            let service = AfterStartup(check: startup, service: worker, finished: workFinished)
            return (worker, services + [.init(service: service, successTerminationBehavior: ending, serviceName: "worker")])
        }

        /// The webhook deliverer and its HTTP client. A drain ends when the queue is empty and,
        /// with webhooks, once they have its events too: the continuation tells the deliverer so.
        func webhookDeliverer(owner: String, draining: Bool) -> ([Entry], AsyncStream<Void>.Continuation?) {
            let workFinished = draining ? AsyncStream.makeStream(of: Void.self) : nil
            let client = WebhookDeliverer.makeHTTPClient()
            let deliverer = WebhookDeliverer(
                endpoints: configuration.webhooks,
                settings: configuration.webhookDelivery,
                database: database,
                httpClient: client,
                owner: owner,
                metrics: metrics,
                workFinished: workFinished?.stream,
                logger: logger
            )
            let services: [Entry] = [
                .init(service: HTTPClientService(client: client), serviceName: "webhook-http-client"),
                .init(
                    service: AfterStartup(check: startup, service: deliverer),
                    successTerminationBehavior: draining ? .gracefullyShutdownGroup : .cancelGroup,
                    serviceName: "webhook-deliverer"
                ),
            ]
            return (services, workFinished?.continuation)
        }

        func api(providers: SignInProviders, inboxes: [any ProviderInbox], signer: AuditSigner?, registry: PrometheusCollectorRegistry) -> RevokerAPI
        {
            RevokerAPI(
                database: database,
                // A statement the API stopped waiting for is ended by the server, not left running.
                queue: queue.statementsLimited(to: configuration.http.databaseTimeout),
                settings: configuration.http,
                clientIDs: configuration.clientIDsByProvider,
                providers: providers,
                defaultMaxAttempts: configuration.worker.maxAttempts,
                registry: registry,
                inboxes: inboxes,
                webhookApps: Dictionary(uniqueKeysWithValues: configuration.webhooks.map { ($0.name, $0.clientIDs) }),
                auditKeys: configuration.audit.verificationKeys,
                auditSigner: signer,
                traced: TracingBootstrap.isBootstrapped,
                callerSampling: configuration.tracing.callerSamplingRatio.map { .decided(ratio: $0) } ?? .followed,
                logger: logger
            )
        }

        /// The API's server, telling `ports` and `onServerRunning` the port it bound.
        func apiService(_ api: RevokerAPI, ports: AsyncStream<Int>.Continuation, onServerRunning: @escaping @Sendable (Int) async -> Void) -> Entry {
            let application = api.application { port in
                ports.yield(port)
                await onServerRunning(port)
            }
            let address = "\(configuration.http.host):\(configuration.http.port)"
            return .init(service: AfterStartup(check: startup, service: Listening(service: application, address: address)), serviceName: "api")
        }
    }
}

/// Starts `service` only once the startup check has passed.
struct AfterStartup<Wrapped: Service>: Service {
    let check: StartupCheck
    let service: Wrapped
    /// Finished when the service returns or throws.
    var finished: AsyncStream<Void>.Continuation?

    func run() async throws {
        defer { finished?.finish() }
        try await check.run()
        try await service.run()
    }
}

/// A server whose address cannot be bound ends with one line naming it, instead of the
/// socket call's text.
struct Listening<Wrapped: Service>: Service {
    let service: Wrapped
    let address: String

    func run() async throws {
        do {
            try await service.run()
        } catch let error as IOError {
            guard let reason = listenFailures[error.errnoCode] else { throw error }
            throw RevokerAppError(.cannotListen, "cannot listen on \(address): \(reason)")
        }
    }
}

/// What a failed bind's `errno` means to the person starting the server.
private let listenFailures: [CInt: String] = [
    EADDRINUSE: "the address is in use (another process listens there; choose another --port or http.port)",
    EADDRNOTAVAIL: "no interface of this machine has that address (check --host or http.host)",
    EACCES: "permission denied (a port below 1024 needs privileges)",
]

/// Keeps HTTP clients' pools open until the group shuts down, then closes them.
struct HTTPClientService: Service {
    let clients: [HTTPClient]

    init(client: HTTPClient) {
        clients = [client]
    }

    init(clients: [HTTPClient]) {
        self.clients = clients
    }

    func run() async throws {
        try? await gracefulShutdown()
        for client in clients { try await client.shutdown() }
    }
}
