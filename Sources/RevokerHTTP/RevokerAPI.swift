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

/// The HTTP API of `revoker serve`: enqueue and inspect revocations, read the audit trail,
/// health, readiness and metrics. The contract is `openapi.yaml` (served at `/openapi.yaml`);
/// a test holds the routes here and the document's paths to each other.
public struct RevokerAPI: Sendable {
    let queue: RevocationQueue
    let audit: AuditLog
    let auditKeys: [AuditPublicKey]
    let auditSigner: AuditSigner?
    let auditVerifications = AuditVerificationGate()
    let inboxes: [any ProviderInbox]
    let feed: EventFeed
    let deliveries: WebhookDeliveries
    let webhookApps: [String: Set<String>]
    let database: PostgresClient
    let clientIDs: [String: Set<String>]
    let providers: SignInProviders
    let settings: HTTPSettings
    let defaultMaxAttempts: Int
    let keys: APIKeys
    let metrics: APIMetrics
    let registry: PrometheusCollectorRegistry
    let logger: Logger

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
        self.audit = AuditLog(client: database, logger: logger)
        self.inboxes = inboxes
        self.feed = EventFeed(client: database, logger: logger)
        self.deliveries = WebhookDeliveries(client: database, logger: logger)
        self.clientIDs = clientIDs
        self.providers = providers
        self.settings = settings
        self.defaultMaxAttempts = defaultMaxAttempts
        self.keys = APIKeys(keys: settings.apiKeys)
        self.metrics = APIMetrics(factory: PrometheusMetricsFactory(registry: registry))
        self.registry = registry
        self.logger = logger
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

        router.get("healthz") { _, _ in try Self.json(["status": "alive"]) }
        router.get("readyz") { _, _ in try await self.readiness() }
        router.get("metrics") { _, _ in try await self.exportMetrics() }
        router.get("openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: Self.openAPIDocument)))
        }

        let v1 = router.group("v1")
        v1.post("revocations") { request, context in try await self.enqueue(request, context: context) }
        v1.get("revocations") { request, _ in try await self.list(request) }
        v1.get("revocations/{id}") { request, context in try await self.show(request, context: context) }
        v1.post("revocations/{id}/cancel") { request, context in try await self.cancel(request, context: context) }
        v1.post("revocations/{id}/requeue") { request, context in try await self.requeue(request, context: context) }
        v1.get("revocations/{id}/receipt") { request, context in try await self.receipt(request, context: context) }
        v1.get("audit") { request, _ in try await self.auditTrail(request) }
        v1.get("audit/verify") { request, _ in try await self.verifyAudit(request) }
        v1.get("events") { request, _ in try await self.eventFeed(request) }
        v1.get("events/deliveries") { request, _ in try await self.webhookDeliveries(request) }
        InboxController(
            inboxes: inboxes,
            messages: ProviderMessages(client: database, logger: logger),
            metrics: metrics,
            databaseTimeout: settings.databaseTimeout
        ).addRoutes(to: v1)
        // Added last, so it wraps only the not-found answer.
        if let ui = settings.ui { addCompliancePages(to: router, settings: ui) }
        router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes.map { ($0.method, $0.path.description) }))
        return router
    }

    /// The OpenAPI document, as embedded at build time.
    public static var openAPIDocument: [UInt8] { PackageResources.openapi_yaml }

    // MARK: Revocations

    static let credentialFields: [(String, CredentialKind)] = [
        ("authorization_code", .authorizationCode), ("refresh_token", .refreshToken), ("access_token", .accessToken),
    ]
    static let enqueueFields: Set<String> = [
        "provider", "client_id", "external_reference", "user_id", "apple_user_id", "id_token", "authorization_code", "refresh_token", "access_token",
        "redirect_uri",
        "max_attempts",
    ]

    func enqueue(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .revocationsWrite)
        let body = try await JSONInput.object(request, limit: settings.maxBodyBytes, allowed: Self.enqueueFields)
        guard let clientID = try JSONInput.string(body, "client_id", required: true),
            let reference = try JSONInput.string(body, "external_reference", required: true)
        else { throw APIProblem.invalid("This field is required.", field: "client_id") }
        var credentials: [Credential] = []
        for (field, kind) in Self.credentialFields {
            guard let secret = try JSONInput.string(body, field) else { continue }
            credentials.append(Credential(kind: kind, secret: secret))
        }
        guard credentials.count == 1, let credential = credentials.first else {
            throw APIProblem.invalid(
                "Give exactly one of authorization_code, refresh_token, access_token.",
                field: credentials.isEmpty ? "authorization_code" : credentials[1].kind.rawValue
            )
        }
        let provider = try JSONInput.string(body, "provider") ?? NewRevocation.defaultProvider
        let userID = try JSONInput.string(body, "user_id")
        let legacyUserID = try JSONInput.string(body, "apple_user_id")
        let idToken = try JSONInput.string(body, "id_token")
        if [userID, legacyUserID, idToken].compactMap({ $0 }).count > 1 {
            throw APIProblem.invalid(
                "Name the user once: user_id, apple_user_id (its older name) or id_token.",
                field: idToken != nil ? "id_token" : "apple_user_id"
            )
        }
        let redirectURI = try JSONInput.string(body, "redirect_uri")
        let maxAttempts = try JSONInput.integer(body, "max_attempts") ?? defaultMaxAttempts
        func newRevocation(user: String?, userField: String) throws -> NewRevocation {
            do {
                return try NewRevocation(
                    provider: provider,
                    clientID: clientID,
                    externalReference: reference,
                    userID: user,
                    userFromIdentityToken: userField == "id_token",
                    credential: credential,
                    redirectURI: redirectURI,
                    maxAttempts: maxAttempts
                )
            } catch {
                // The credential's field is named after its kind in this API.
                let field =
                    switch error.field {
                    case .credential: credential.kind.rawValue
                    case .userID: userField
                    default: error.field.rawValue
                    }
                throw APIProblem.invalid("This field \(error.rule).", field: field)
            }
        }
        var new = try newRevocation(user: userID ?? legacyUserID, userField: userID != nil ? "user_id" : "apple_user_id")
        guard let served = clientIDs[provider] else {
            throw APIProblem.invalid(
                "No such provider is configured; configured: \(clientIDs.keys.sorted().joined(separator: ", ")).",
                field: "provider"
            )
        }
        guard served.contains(clientID) else {
            throw APIProblem.invalid("No app with this client_id is configured for this provider.", field: "client_id")
        }
        try caller.require(clientID)
        if let idToken {
            new = try newRevocation(user: try await verifiedSubject(of: idToken, provider: provider, clientID: clientID), userField: "id_token")
        }
        let result = try await store { [queue, new] in try await queue.enqueue(new, actor: "api:\(caller.name)") }
        switch result {
        case .created(let created):
            metrics.enqueued()
            context.logger.debug("Enqueued over HTTP", metadata: ["revoker.request.id": "\(created.id)", "revoker.client_id": "\(clientID)"])
            return try Self.json(RevocationView(created), status: .accepted)
        case .existing(let existing):
            return try Self.json(RevocationView(existing), status: .ok)
        }
    }

    /// The `sub` of an identity token of the app, verified completely by its provider.
    func verifiedSubject(of idToken: String, provider: String, clientID: String) async throws -> String {
        guard idToken.utf8.count <= 16_384, let name = ProviderName(rawValue: provider), let verifier = providers[name] else {
            throw APIProblem.invalid("This field must be an identity token of at most 16384 bytes from the request's provider.", field: "id_token")
        }
        do {
            return try await verifier.verifyIdentityToken(idToken, clientID: clientID)
        } catch let rejected as IdentityTokenRejected {
            throw APIProblem.invalid("The identity token did not verify (\(rejected.code)): \(rejected.reason)", field: "id_token")
        } catch let failure as ProviderFailure {
            logger.warning("The provider's keys could not be fetched to verify an identity token", metadata: ["provider.detail": "\(failure.detail)"])
            var problem = APIProblem(.serviceUnavailable, "The provider's keys could not be fetched to verify the identity token; try again.")
            problem.headers[.retryAfter] = "5"
            throw problem
        }
    }

    func list(_ request: Request) async throws -> Response {
        let caller = try keys.authorize(request, .revocationsRead)
        let query = try QueryInput(
            request,
            allowed: ["provider", "client_id", "external_reference", "user_id", "apple_user_id", "state", "created_before", "limit"]
        )
        var state: RevocationState?
        if let name = query.values["state"] {
            guard let parsed = RevocationState(rawValue: name) else {
                throw APIProblem.badRequest("Unknown state; known: \(RevocationState.all.map(\.rawValue).joined(separator: ", ")).", field: "state")
            }
            state = parsed
        }
        let provider = try query.string("provider")
        if let provider, !NewRevocation.isProviderName(provider) {
            throw APIProblem.badRequest("A provider's name is 1 to 32 characters of a-z, 0-9 and _, starting with a letter.", field: "provider")
        }
        var filter = RevocationFilter(
            clientID: try query.string("client_id"),
            externalReference: try query.string("external_reference"),
            userID: try query.string("user_id") ?? query.string("apple_user_id"),
            state: state,
            createdBefore: try query.date("created_before"),
            limit: try query.integer("limit", range: 1...1000) ?? 100,
            provider: provider
        )
        if let clientID = filter.clientID { try caller.require(clientID) }
        filter.clientIDs = caller.filter
        let requests = try await store { [queue, filter] in try await queue.list(filter) }
        return try Self.json(RevocationList(revocations: requests.map(RevocationView.init)))
    }

    func show(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .revocationsRead)
        return try Self.json(RevocationView(try await reachableRequest(try Self.id(context), caller)))
    }

    func cancel(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .revocationsWrite)
        let id = try Self.id(context)
        if caller.clientIDs != nil { _ = try await reachableRequest(id, caller) }
        switch try await store({ [queue] in try await queue.cancel(id: id, actor: "api:\(caller.name)") }) {
        case .cancelled(let cancelled): return try Self.json(RevocationView(cancelled))
        case .notFound: throw APIProblem.notFound("No revocation with this id.")
        case .notCancellable(let existing):
            throw APIProblem.conflict("Only a pending revocation can be cancelled; this one is \(existing.state.rawValue).")
        }
    }

    func requeue(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .admin)
        let id = try Self.id(context)
        if caller.clientIDs != nil { _ = try await reachableRequest(id, caller) }
        switch try await store({ [queue] in try await queue.requeueConfigurationFailure(id: id, actor: "api:\(caller.name)") }) {
        case .requeued(let requeued): return try Self.json(RevocationView(requeued), status: .accepted)
        case .notFound: throw APIProblem.notFound("No revocation with this id.")
        case .notRequeueable(let existing):
            throw APIProblem.conflict(
                "Only a revocation that failed as client_misconfigured and still holds its credential can be re-queued; this one is \(existing.state.rawValue)\(existing.outcome.map { "/\($0.rawValue)" } ?? "")."
            )
        }
    }

    /// The request with this id, when it exists and the caller's key reaches its app; a request
    /// of another app is not found, so a key does not learn which ids exist elsewhere.
    func reachableRequest(_ id: UUID, _ caller: APICaller) async throws -> RevocationRequest {
        guard let found = try await store({ [queue] in try await queue.request(id: id) }), caller.reaches(found.clientID) else {
            throw APIProblem.notFound("No revocation with this id.")
        }
        return found
    }

    static func id(_ context: APIRequestContext) throws -> UUID {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
            throw APIProblem.badRequest("The revocation id must be a UUID.", field: "id")
        }
        return id
    }

    // MARK: Events

    func eventFeed(_ request: Request) async throws -> Response {
        let caller = try keys.authorize(request, .eventsRead)
        let query = try QueryInput(request, allowed: ["after", "client_id", "limit"])
        var cursor: EventCursor?
        if let text = try query.string("after", length: 1...64) {
            guard let parsed = EventCursor(text) else {
                throw APIProblem.badRequest("The cursor is not one this API returned.", field: "after")
            }
            cursor = parsed
        }
        var clientIDs = caller.filter
        if let clientID = try query.string("client_id") {
            try caller.require(clientID)
            clientIDs = [clientID]
        }
        let limit = try query.integer("limit", range: 1...1000) ?? 100
        let events = try await store { [feed, cursor, clientIDs] in try await feed.events(after: cursor, clientIDs: clientIDs, limit: limit) }
        // The cursor to continue from: the last event's, or the one given when nothing is new.
        let next = events.last?.cursor ?? cursor
        var headers: HTTPFields = [.contentType: "application/json"]
        if let next { headers[Self.nextCursorHeader] = next.description }
        let text =
            "{\"events\":[\(events.map(\.json).joined(separator: ","))],\"next_cursor\":\(next.map { AuditExport.jsonString($0.description) } ?? "null")}"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Whether `Accept` lists `mediaType` (a plain check; CSV is asked for explicitly).
    static func accepts(_ request: Request, _ mediaType: String) -> Bool {
        request.headers[values: .accept].contains { value in
            value.split(separator: ",").contains { $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == mediaType }
        }
    }

    /// Where each webhook endpoint stands; a key limited to apps sees the endpoints that serve only its apps.
    func webhookDeliveries(_ request: Request) async throws -> Response {
        let caller = try keys.authorize(request, .eventsRead)
        _ = try QueryInput(request, allowed: [])
        let states = try await store { [deliveries] in try await deliveries.states() }.filter { state in
            guard let reachable = caller.clientIDs else { return true }
            return webhookApps[state.endpoint].map { !$0.isEmpty && $0.isSubset(of: reachable) } ?? false
        }
        let text = "{\"deliveries\":[\(states.map(\.json).joined(separator: ","))]}"
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: Health and metrics

    func readiness() async throws -> Response {
        let migrator = Migrator(client: database, logger: logger)
        let status: String
        do {
            status = try await withDeadline(.seconds(3)) { try await migrator.isCurrent() } ? "ready" : "migrations pending: run `revoker migrate`"
        } catch {
            status = "database unreachable"
        }
        var body = ["status": status]
        // Still ready to take requests, but the trail's evidence has stopped: say why.
        if let refusal = auditSigner?.refusal { body["audit"] = "checkpoints refused: \(refusal)" }
        return try Self.json(body, status: status == "ready" ? .ok : .serviceUnavailable)
    }

    func exportMetrics() async throws -> Response {
        // Queue gauges are read when scraped, so they are as fresh as the scrape.
        let queue = self.queue
        if let statistics = try? await withDeadline(.seconds(3), { try await queue.statistics() }) {
            metrics.queue(statistics)
        }
        if let states = try? await withDeadline(.seconds(3), { [deliveries] in try await deliveries.states() }) {
            metrics.webhooks(states)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }

    /// Runs one database call of a request under ``HTTPSettings/databaseTimeout``: a client
    /// learns of an unreachable database (503) before its own timeout gives up.
    func store<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withDeadline(settings.databaseTimeout, body)
    }

    // MARK: Encoding

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value)))
        )
    }
}
