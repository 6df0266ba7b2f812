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
    let settings: HTTPSettings
    let metrics: APIMetrics
    let logger: Logger
    let health: HealthController
    let revocations: RevocationsController
    let grants: GrantsController
    let deletions: DeletionsController
    let audit: AuditController
    let events: EventsController
    let inboxes: InboxController
    let erasures: ErasuresController
    let statusPage: ErasureStatusPage
    let pages: CompliancePagesController?
    /// Whether requests are traced: off, the API makes no span at all.
    let traced: Bool
    /// Whose word decides whether a caller's trace is sampled.
    let callerSampling: CallerSampling

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
    ///   - traced: whether a tracer is bootstrapped: each request is then a span (``RequestTracingMiddleware``).
    ///   - callerSampling: whether a caller's `sampled` flag is followed, or the operator's sampler decides.
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
        traced: Bool = false,
        callerSampling: CallerSampling = .followed,
        logger: Logger
    ) {
        self.traced = traced
        self.callerSampling = callerSampling
        let keys = APIKeys(keys: settings.apiKeys)
        let metrics = APIMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let store = DatabaseDeadline(limit: settings.databaseTimeout, metrics: metrics)
        let deliveries = WebhookDeliveries(client: database, logger: logger)
        let auditLog = AuditLog(client: database, logger: logger)
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.health = HealthController(
            database: database,
            queue: queue,
            deliveries: deliveries,
            auditSigner: auditSigner,
            metrics: metrics,
            registry: registry,
            apps: Set(clientIDs.values.joined()),
            webhookApps: webhookApps,
            logger: logger
        )
        for inbox in inboxes where inbox.closedReason == nil { metrics.inboxOpened(inbox.metricLabel) }
        self.revocations = RevocationsController(
            queue: queue,
            keys: keys,
            rules: EnqueueRules(served: clientIDs, providers: providers),
            defaultMaxAttempts: defaultMaxAttempts,
            maxBodyBytes: settings.maxBodyBytes,
            metrics: metrics,
            store: store,
            logger: logger
        )
        self.grants = GrantsController(
            queue: queue,
            keys: keys,
            rules: EnqueueRules(served: clientIDs, providers: providers),
            maxBodyBytes: settings.maxBodyBytes,
            store: store,
            exchangeWait: settings.grantExchangeWait,
            logger: logger
        )
        self.deletions = DeletionsController(
            queue: queue,
            keys: keys,
            revocations: revocations,
            maxBodyBytes: settings.maxBodyBytes,
            store: store,
            logger: logger
        )
        let audit = AuditController(
            database: database,
            audit: auditLog,
            keys: keys,
            auditKeys: auditKeys,
            auditSigner: auditSigner,
            eventKinds: AuditEventKind.known(adding: inboxes.map(\.source.auditEvent)),
            store: store,
            logger: logger
        )
        self.audit = audit
        self.events = EventsController(
            feed: EventFeed(client: database, logger: logger),
            deliveries: deliveries,
            webhookApps: webhookApps,
            keys: keys,
            store: store
        )
        let publicURL = settings.publicURL
        let statusURL: @Sendable (String, Request) -> String = { code, request in
            ErasureStatusPage.url(code: code, publicURL: publicURL, request: request)
        }
        self.inboxes = InboxController(
            inboxes: inboxes,
            messages: ProviderMessages(client: database, logger: logger, acknowledged: queue.acknowledged),
            metrics: metrics,
            store: store,
            statusURL: statusURL
        )
        let erasures = ErasureRequests(client: database, logger: logger)
        self.erasures = ErasuresController(erasures: erasures, keys: keys, maxBodyBytes: settings.maxBodyBytes, store: store, statusURL: statusURL)
        self.statusPage = ErasureStatusPage(erasures: erasures, store: store, secure: publicURL?.scheme == "https")
        self.pages = settings.ui.map { ui in
            CompliancePagesController(
                ui: ui,
                keys: keys,
                database: database,
                queue: queue,
                audit: auditLog,
                audits: audit,
                store: store,
                logger: logger
            )
        }
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
        // First, so that its span covers the others and sees the answer they make of an error.
        if traced { router.add(middleware: RequestTracingMiddleware(sampling: callerSampling)) }
        router.add(middleware: HTTPMetricsMiddleware(metrics: metrics))
        router.add(middleware: ProblemMiddleware())
        health.addRoutes(to: router)
        let v1 = router.group("v1")
        revocations.addRoutes(to: v1)
        grants.addRoutes(to: v1)
        deletions.addRoutes(to: v1)
        audit.addRoutes(to: v1)
        events.addRoutes(to: v1)
        inboxes.addRoutes(to: v1)
        erasures.addRoutes(to: v1)
        statusPage.addRoutes(to: router)
        // Added last, so it wraps only the not-found answer.
        pages?.addRoutes(to: router)
        router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes.map { ($0.method, $0.path.description) }))
        return router
    }

    /// The OpenAPI document, as embedded at build time.
    public static var openAPIDocument: [UInt8] { PackageResources.openapi_yaml }
}
