import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerEvidence
import RevokerProvider
import RevokerStore

/// Liveness, readiness, metrics and the OpenAPI document: what needs no API key.
struct HealthController {
    let database: PostgresClient
    let queue: RevocationQueue
    let deliveries: WebhookDeliveries
    let auditSigner: AuditSigner?
    let metrics: APIMetrics
    let registry: PrometheusCollectorRegistry
    /// The configured apps, each with a `revoker_app_paused` gauge.
    let apps: Set<String>
    /// Each webhook endpoint's apps, for `revoker_webhook_lag_seconds`.
    let webhookApps: [String: Set<String>]
    let logger: Logger

    func addRoutes(to router: Router<APIRequestContext>) {
        router.get("healthz") { _, _ in ["status": "alive"] }
        router.get("readyz") { _, _ in await readiness() }
        router.get("metrics") { _, _ in try await exportMetrics() }
        router.get("openapi.yaml") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: ByteBuffer(bytes: RevokerAPI.openAPIDocument))
            )
        }
    }

    func readiness() async -> EditedResponse<[String: String]> {
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
        return EditedResponse(status: status == "ready" ? .ok : .serviceUnavailable, response: body)
    }

    func exportMetrics() async throws -> Response {
        // The gauges over the database are read when scraped, so they are as fresh as the scrape.
        // One read after another, each within 3 s and all within 6 s (under Prometheus's default
        // scrape timeout of 10 s): a scrape holds at most one of the pool's connections, which
        // the API and the worker share; what could not be read in time keeps its last value.
        let (queue, deliveries, webhookApps) = (self.queue, self.deliveries, self.webhookApps)
        let checkpoints = auditSigner.map { _ in AuditCheckpoints(client: database, logger: logger) }
        let budget = ContinuousClock.now + .seconds(6)
        func read<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async -> T? {
            let left = min(budget - ContinuousClock.now, .seconds(3))
            guard left > .zero else { return nil }
            return try? await withDeadline(left, body)
        }
        if let statistics = await read({ try await queue.statistics() }) { metrics.queue(statistics) }
        if let paused = await read({ try await queue.pausedApps() }) { metrics.pauses(paused, apps: apps) }
        if let live = await read({ try await queue.liveWorkers() }) { metrics.workers(live: live) }
        if let states = await read({ try await deliveries.states() }) { metrics.webhooks(states) }
        if let lag = await read({ try await deliveries.lag(of: webhookApps) }) { metrics.webhookLag(lag) }
        if let checkpoints, let signing = await read({ try await checkpoints.signingLag() }) { metrics.audit(signing) }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }
}
