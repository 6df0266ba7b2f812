import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerStore

/// Answers 405 with `Allow` when a known path is asked with a method it does not serve: a 404
/// would tell the caller that the resource does not exist.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let routes: [(template: [Substring], method: HTTPRequest.Method)]

    init(routes: [(method: HTTPRequest.Method, path: String)]) {
        self.routes = routes.map { ($0.path.split(separator: "/"), $0.method) }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/")
            let allowed = Set(routes.filter { Self.matches($0.template, segments) }.map(\.method.rawValue))
            guard !allowed.isEmpty, !allowed.contains(request.method.rawValue) else { throw error }
            var problem = APIProblem(.methodNotAllowed, "This path does not serve this method.")
            problem.headers[.allow] = allowed.sorted().joined(separator: ", ")
            throw problem
        }
    }

    /// Whether `segments` fit `template`, where `{name}` stands for any one segment.
    static func matches(_ template: [Substring], _ segments: [Substring]) -> Bool {
        template.count == segments.count && zip(template, segments).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
    }
}
