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
}
