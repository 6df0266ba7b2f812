import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerEvidence
import RevokerProvider
import RevokerStore

/// The HTTP API of `revoker serve`: enqueue and inspect revocations, read the audit trail and
/// the event feed, receive the providers' messages, health, readiness and metrics. The contract
/// is `openapi.yaml` (served at `/openapi.yaml`); a test holds the routes here and the
/// document's paths to each other.
///
/// Each resource is a controller holding only its own dependencies (`Controllers/`, `UI/`);
/// this value builds them and composes their routes.
public struct RevokerAPI: Sendable {
    let database: PostgresClient
    let queue: RevocationQueue
    let settings: HTTPSettings
    let clientIDs: [String: Set<String>]
    let providers: SignInProviders
    let defaultMaxAttempts: Int
    let inboxes: [any ProviderInbox]
    let webhookApps: [String: Set<String>]
    let auditKeys: [AuditPublicKey]
    let auditSigner: AuditSigner?
    let keys: APIKeys
    let metrics: APIMetrics
    let registry: PrometheusCollectorRegistry
    let logger: Logger
    /// One verification of the trail at a time, across every router built from this value.
    let auditController: AuditController

    /// - Parameters:
    ///   - queue: where enqueued requests go (its sealer seals their credentials).
    ///   - clientIDs: the apps a request may name, by provider (`apple`, `google`).
    ///   - providers: verify the identity tokens a request may carry instead of a user id.
    ///   - defaultMaxAttempts: for a request that names none.
    ///   - registry: what `/metrics` exports; the API's own metrics are recorded into it.
    ///   - inboxes: where providers push signed messages (Apple's notifications, Google's
    ///     security events), each on its own routes.
    ///   - webhookApps: each webhook endpoint's apps, by endpoint name.
    ///   - auditKeys: the public keys that verify the audit trail's checkpoints.
    ///   - auditSigner: signs receipts (and the checkpoints they need); without it there are none.
    public init(
        database: PostgresClient,
        queue: RevocationQueue,
        settings: HTTPSettings,
        clientIDs: [String: Set<String>],
        providers: SignInProviders = SignInProviders([]),
        defaultMaxAttempts: Int,
        registry: PrometheusCollectorRegistry,
        inboxes: [any ProviderInbox] = [],
        webhookApps: [String: Set<String>] = [:],
        auditKeys: [AuditPublicKey] = [],
        auditSigner: AuditSigner? = nil,
        logger: Logger
    ) {
        self.webhookApps = webhookApps
        self.auditKeys = auditKeys
        self.auditSigner = auditSigner
        self.database = database
        self.queue = queue
        self.inboxes = inboxes
        self.clientIDs = clientIDs
        self.providers = providers
        self.settings = settings
        self.defaultMaxAttempts = defaultMaxAttempts
        self.keys = APIKeys(keys: settings.apiKeys)
        self.metrics = APIMetrics(factory: PrometheusMetricsFactory(registry: registry))
        self.registry = registry
        self.logger = logger
        self.auditController = AuditController(
            database: database,
            audit: AuditLog(client: database, logger: logger),
            keys: keys,
            auditKeys: auditKeys,
            auditSigner: auditSigner,
            databaseTimeout: settings.databaseTimeout,
            store: DatabaseDeadline(limit: settings.databaseTimeout),
            logger: logger
        )
    }

    /// An application serving the API on the configured address; `onServerRunning` receives the
    /// bound port (configure port 0 for any free one).
    public func application(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        let settings = self.settings
        return Application(
            router: router(),
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [RequestTimeouts(headerTimeout: settings.headerTimeout, bodyTimeout: settings.bodyTimeout)],
                    idleTimeout: TimeAmount(settings.idleTimeout)
                )
            ),
            configuration: .init(
                address: .hostname(settings.host, port: settings.port),
                serverName: "revoker",
                availableConnectionsDelegate: MaximumAvailableConnections(settings.maxConnections, logger: logger)
            ),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
            logger: logger
        )
    }

    /// The routes.
    public func router() -> Router<APIRequestContext> {
        let router = Router(context: APIRequestContext.self)
        router.add(middleware: HTTPMetricsMiddleware(metrics: metrics))
        router.add(middleware: ProblemMiddleware())
        let store = DatabaseDeadline(limit: settings.databaseTimeout)
        let deliveries = WebhookDeliveries(client: database, logger: logger)
        HealthController(
            database: database,
            queue: queue,
            deliveries: deliveries,
            auditSigner: auditSigner,
            metrics: metrics,
            registry: registry,
            logger: logger
        ).addRoutes(to: router)

        let v1 = router.group("v1")
        RevocationsController(
            queue: queue,
            keys: keys,
            rules: EnqueueRules(served: clientIDs, providers: providers),
            defaultMaxAttempts: defaultMaxAttempts,
            maxBodyBytes: settings.maxBodyBytes,
            metrics: metrics,
            store: store,
            logger: logger
        ).addRoutes(to: v1)
        auditController.addRoutes(to: v1)
        EventsController(
            feed: EventFeed(client: database, logger: logger),
            deliveries: deliveries,
            webhookApps: webhookApps,
            keys: keys,
            store: store
        ).addRoutes(to: v1)
        InboxController(
            inboxes: inboxes,
            messages: ProviderMessages(client: database, logger: logger),
            metrics: metrics,
            databaseTimeout: settings.databaseTimeout
        ).addRoutes(to: v1)
        // Added last, so it wraps only the not-found answer.
        if let ui = settings.ui {
            CompliancePagesController(
                ui: ui,
                keys: keys,
                database: database,
                queue: queue,
                audit: AuditLog(client: database, logger: logger),
                audits: auditController,
                databaseTimeout: settings.databaseTimeout,
                store: store,
                logger: logger
            ).addRoutes(to: router)
        }
        router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes.map { ($0.method, $0.path.description) }))
        return router
    }

    /// The OpenAPI document, as embedded at build time.
    public static var openAPIDocument: [UInt8] { PackageResources.openapi_yaml }
}
