import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerStore

/// Records each request's latency by route template (never the concrete path), method and status.
struct HTTPMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: APIMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let status: Int
        do {
            let response = try await next(request, context)
            status = response.status.code
            record(request, context: context, status: status, started: started)
            return response
        } catch let error as any HTTPResponseError {
            record(request, context: context, status: error.status.code, started: started)
            throw error
        } catch {
            record(request, context: context, status: 500, started: started)
            throw error
        }
    }

    /// Keeps the method label bounded: any other method a client invents is `other`.
    static var knownMethods: Set<HTTPRequest.Method> { [.get, .head, .post, .put, .delete, .patch, .options] }

    private func record(_ request: Request, context: Context, status: Int, started: ContinuousClock.Instant) {
        metrics.httpRequest(
            route: context.endpointPath ?? "unmatched",
            method: Self.knownMethods.contains(request.method) ? request.method.rawValue : "other",
            status: status,
            duration: ContinuousClock.now - started
        )
    }
}
