import AsyncHTTPClient
import CoreMetrics
import Logging
import PostgresNIO
import Prometheus
import RevokerHTTP
import RevokerProvider
import RevokerStore
import RevokerWebhooks
import RevokerWorker
import ServiceLifecycle
import UnixSignals

/// The whole program, assembled once from a ``RevokerConfiguration``: the PostgreSQL client,
/// and, when asked, the providers' connection pools, the HTTP API and the worker, each a `Service` of
/// one `ServiceGroup`. Every command, the demo, the benchmark and the tests build it here.
///
/// Nothing serves before the startup check: the database answers within ten seconds and,
/// unless a command says otherwise, its schema is current.
public struct RevokerApp: Sendable {
    /// What a process runs beside the database client.
    public struct Parts: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// The HTTP API.
        public static let api = Parts(rawValue: 1)
        /// The worker (it brings the providers' connection pools).
        public static let worker = Parts(rawValue: 2)
    }

    /// The settings it was built from.
    public let configuration: RevokerConfiguration
    /// The database client (a service of the group).
    public let database: PostgresClient
    /// The queue over ``database``, sealing with the configured keys.
    public let queue: RevocationQueue
    /// The worker, when asked for; its ``RevocationWorker/report()`` tells what it did.
    public let worker: RevocationWorker?
    /// The HTTP API, when asked for.
    public let api: RevokerAPI?
    /// What `/metrics` exports: the API's and the worker's metrics.
    public let metrics: PrometheusCollectorRegistry
    /// The check every serving part waits for.
    public let startup: StartupCheck
    let services: [ServiceGroupConfiguration.ServiceConfiguration]
    let logger: Logger
    /// The API's bound port, once it listens.
    let ports: AsyncStream<Int>
    let portContinuation: AsyncStream<Int>.Continuation
    let servesAPI: Bool

    /// Builds the parts `parts` names.
    ///
    /// - Parameters:
    ///   - workerMode: `.drain(deadline:)` ends the group when nothing is left due.
    ///   - requireCurrentSchema: whether the startup check also asks for a current schema
    ///     (`migrate` itself, and the commands that only read, do not).
    ///   - onServerRunning: receives the API's bound port (configure port 0 for any free one).
    /// - Throws: ``RevokerAppError`` when the database settings or an app's key are unusable.
    public init(
        configuration: RevokerConfiguration,
        parts: Parts = [],
        workerMode: RevocationWorker.Mode = .continuous,
        requireCurrentSchema: Bool = true,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        logger: Logger
    ) async throws {
        let settings = try Self.databaseSettings(configuration)
        self.configuration = configuration
        self.logger = logger
        self.database = PostgresClient(configuration: settings, backgroundLogger: logger)
        self.queue = RevocationQueue(client: database, sealer: configuration.sealer, logger: logger)
        self.metrics = PrometheusCollectorRegistry()
        (self.ports, self.portContinuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
        self.servesAPI = parts.contains(.api)
        Self.raiseOpenFileLimit(configuration, parts: parts, logger: logger)
        self.startup = Self.startupCheck(
            configuration,
            settings: settings,
            database: database,
            queue: queue,
            parts: parts,
            requireCurrentSchema: requireCurrentSchema,
            logger: logger
        )

        let assembly = Assembly(
            configuration: configuration,
            parts: parts,
            database: database,
            queue: queue,
            startup: startup,
            metrics: Self.metricsFactory(parts, registry: metrics),
            logger: logger
        )
        // Every service is named: otherwise ServiceLifecycle describes each one by reflecting
        // over all its fields, which once crashed the test suite (a null array in the reflection).
        var services: [Entry] = []
        // First, so that it stops last: it flushes the spans of every part that ends before it
        // (a drain's end, SIGTERM).
        services += try assembly.tracing()
        services.append(.init(service: database, serviceName: "database"))
        // Right after the database: at shutdown it stops after every writer, so its last
        // checkpoint covers their rows.
        let signer = try assembly.auditSigner()
        services += assembly.auditCheckpoints(signer)
        services += assembly.lostWriteWatch()
        let (providers, inboxes) = try await assembly.providers(services: &services)
        if parts.contains(.worker) {
            let (worker, workerServices) = assembly.worker(providers: providers, mode: workerMode)
            self.worker = worker
            services += workerServices
        } else {
            self.worker = nil
        }
        if parts.contains(.api) {
            let api = assembly.api(providers: providers, inboxes: inboxes, signer: signer, registry: metrics)
            self.api = api
            services.append(assembly.apiService(api, ports: portContinuation, onServerRunning: onServerRunning))
        } else {
            self.api = nil
        }
        self.services = services
    }

    /// How long a graceful shutdown may run past the worker's grace period
    /// (`worker.shutdown_grace_seconds`): a healthy shutdown needs a second or two past it to hand
    /// requests back and deregister; this leaves room for a slow database. A database that
    /// stopped answering is what the limit is for.
    public static let shutdownMargin: Duration = .seconds(30)

    /// How long the parts have to end once cancelled, before the process is stopped with a
    /// fatal error: PostgresNIO's `PostgresClient.run()` has been seen never to return after a
    /// cancellation.
    public static let cancellationLimit: Duration = .seconds(15)

    /// How long a graceful shutdown may take before what is left is cancelled.
    public var shutdownLimit: Duration { configuration.worker.shutdownGrace + Self.shutdownMargin }

    /// Runs every part until one of `signals` (or, in drain mode, the worker's end) shuts the
    /// group down gracefully; throws the first part's error, such as a failed startup check.
    ///
    /// The shutdown is bounded: past ``shutdownLimit`` what is left is cancelled, and this
    /// throws a ``RevokerAppError/Code/shutdownCutShort`` error; parts that do not end within
    /// ``cancellationLimit`` of their cancellation stop the process.
    public func run(gracefulShutdownSignals signals: [UnixSignal] = []) async throws {
        let watch = ShutdownWatch()
        var configuration = ServiceGroupConfiguration(
            services: services + [.init(service: watch, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore)],
            gracefulShutdownSignals: signals,
            logger: logger
        )
        configuration.maximumGracefulShutdownDuration = shutdownLimit
        configuration.maximumCancellationDuration = Self.cancellationLimit
        let outcome: Result<Void, any Error>
        do {
            outcome = .success(try await ServiceGroup(configuration: configuration).run())
        } catch {
            outcome = .failure(error)
        }
        // The watch hears of the shutdown a moment after the group starts its clock, so a shutdown
        // the group cut at the limit can measure a little under it here.
        if let began = watch.began, ContinuousClock.now - began >= shutdownLimit - .seconds(1) {
            let seconds = shutdownLimit.components.seconds
            logger.error("Shutdown did not finish in time; what was left was cancelled", metadata: ["revoker.shutdown_limit_s": "\(seconds)"])
            throw RevokerAppError(
                .shutdownCutShort,
                "shutdown did not finish within \(seconds) s (worker.shutdown_grace_seconds + \(Self.shutdownMargin.components.seconds) s); what was left was cancelled. Is the database answering?"
            )
        }
        try outcome.get()
    }

    /// The parts running, as ``withRunning(waitForStartup:_:)`` hands them to its body.
    public struct Running: Sendable {
        /// The assembled program.
        public let app: RevokerApp
        /// The port the API listens on, when it was built.
        public let apiPort: Int?
        /// The database client, running.
        public var database: PostgresClient { app.database }
    }

    /// Runs the parts, waits for the startup check (unless `waitForStartup` is false) and for
    /// the API to listen, runs `body`, then shuts everything down gracefully.
    public func withRunning<T>(waitForStartup: Bool = true, _ body: (Running) async throws -> T) async throws -> T {
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { [portContinuation] in
                defer { portContinuation.finish() }
                try await group.run()
            }
            let result: Result<T, any Error>
            do {
                if waitForStartup { try await startup.run() }
                var port: Int?
                if servesAPI {
                    var iterator = ports.makeAsyncIterator()
                    guard let bound = await iterator.next() else {
                        throw RevokerAppError(
                            .configuration,
                            "The API stopped before it listened on \(configuration.http.host):\(configuration.http.port)."
                        )
                    }
                    port = bound
                }
                result = .success(try await body(Running(app: self, apiPort: port)))
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            do {
                try await tasks.waitForAll()
            } catch {
                // The body's own error tells more than the group's.
                if case .success = result { throw error }
            }
            return try result.get()
        }
    }

    /// Applies the migrations this build knows, then registers the configured apps and intake
    /// keys for the SQL enqueue path: what `revoker migrate` does. Returns the versions applied.
    public func migrate() async throws -> [Int] {
        let applied = try await Migrator(client: database, logger: logger).migrate()
        try await queue.publishSQLIntake(apps: configuration.sqlApps)
        return applied
    }

    /// Runs `body` with the configured providers (for a one-shot command), their connections
    /// closed afterwards.
    public static func withProviders<T>(
        _ configuration: RevokerConfiguration,
        logger: Logger,
        _ body: (SignInProviders) async throws -> T
    ) async throws -> T {
        let clients = configuration.makeProviderHTTPClients()
        do {
            let result = try await body(try await makeProviders(configuration, clients: clients, logger: logger).providers)
            try await clients.shutdown()
            return result
        } catch {
            try? await clients.shutdown()
            throw error
        }
    }

    /// Every registered provider with its configured apps over the same connection pools, and
    /// their inboxes.
    static func makeProviders(
        _ configuration: RevokerConfiguration,
        clients: ProviderHTTPClients,
        logger: Logger
    ) async throws -> (providers: SignInProviders, inboxes: [any ProviderInbox]) {
        if let file = configuration.extraTrustRootsFile {
            logger.notice("Calls to providers also trust the authorities in \(file) (extra_trust_roots_file, a test setting)")
        }
        let context = configuration.providerContext(logger: logger)
        var made: [ProviderParts] = []
        for provider in configuration.providers {
            do {
                made.append(try await provider.make(clients, context))
            } catch let error as ConfigurationError {
                throw RevokerAppError(.configuration, error.message)
            }
        }
        // A registered provider left out of a configuration built in code still answers at its routes.
        let closed = RevokerConfiguration.plugins.filter { plugin in !made.contains { $0.provider.name == plugin.name } }
        return (SignInProviders(made.map(\.provider)), made.flatMap(\.inboxes) + closed.flatMap(\.closedInboxes))
    }
}
