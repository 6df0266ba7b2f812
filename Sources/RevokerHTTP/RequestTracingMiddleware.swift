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
///
/// The caller's `sampled` flag would decide whether the whole trace is exported: anyone could
/// make the operator export every request. So it is followed only when the operator trusts the
/// callers (``CallerSampling/followed``); otherwise the trace is continued with the operator's
/// own decision in its place.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    let sampling: CallerSampling

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let method = request.method.rawValue
        let parent = request.traceParent.map(sampling.applied)
        return try await withSpan("\(method)", context: parent?.context ?? .topLevel, ofKind: .server) { span in
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

/// Whose word decides whether a caller's trace is sampled (`tracing.trust_caller_sampling`).
public enum CallerSampling: Sendable, Hashable {
    /// The caller's `sampled` flag is followed: the operator trusts every caller of the API.
    case followed
    /// The caller's trace is continued with its `sampled` flag replaced by the operator's decision:
    /// a trace is sampled when its id falls within `ratio` (``TraceParent/isSampled(atRatio:)``).
    case decided(ratio: Double)

    /// `parent` with the `sampled` flag this policy gives it.
    func applied(to parent: TraceParent) -> TraceParent {
        switch self {
        case .followed: parent
        case .decided(let ratio): parent.sampled(parent.isSampled(atRatio: ratio))
        }
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
