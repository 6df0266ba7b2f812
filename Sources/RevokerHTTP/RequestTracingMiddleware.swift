import HTTPTypes
import Hummingbird
import RevokerProvider
import Tracing

/// A server span per request, continuing the caller's trace when its `traceparent` is
/// well-formed; a malformed one is ignored, as W3C Trace Context asks.
///
/// Not Hummingbird's `TracingMiddleware`: that hands every header to the tracer, and swift-otel
/// logs the whole carrier (the `Authorization` header with it) when a `traceparent` does not
/// parse. Here only a checked `traceparent` reaches the tracer, and the span records the method,
/// the route and the status: no header, no path (it may name an account), no query.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let method = request.method.rawValue
        return try await withSpan("\(method)", context: request.traceParent?.context ?? .topLevel, ofKind: .server) { span in
            span.attributes["http.request.method"] = method
            do {
                let response = try await next(request, context)
                Self.ended(span, method: method, route: context.endpointPath, status: Int(response.status.code))
                return response
            } catch {
                let status = (error as? any HTTPResponseError)?.status.code ?? 500
                Self.ended(span, method: method, route: context.endpointPath, status: Int(status))
                throw error
            }
        }
    }

    private static func ended(_ span: any Span, method: String, route: String?, status: Int) {
        if let route {
            span.operationName = "\(method) \(route)"
            span.attributes["http.route"] = route
        }
        span.attributes["http.response.status_code"] = status
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

extension HTTPField.Name {
    static let traceParent = HTTPField.Name(TraceParent.headerName)!
}

extension Request {
    /// The caller's `traceparent`, when it sent one well-formed header.
    var traceParent: TraceParent? {
        headers[.traceParent].flatMap { TraceParent($0) }
    }

    /// What a request enqueued by this call keeps (``TraceParent/forQueue(incoming:)``).
    var queueTraceParent: TraceParent? {
        TraceParent.forQueue(incoming: traceParent)
    }
}
