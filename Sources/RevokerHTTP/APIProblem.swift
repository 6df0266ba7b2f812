import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1
import RevokerStore

/// A refusal of the API, answered as an RFC 9457 problem (`application/problem+json`).
///
/// `detail` is written for the caller and never holds a submitted value: a credential sent in
/// the wrong field must not be echoed back.
public struct APIProblem: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    /// What went wrong, for people.
    public var detail: String
    /// The offending field or parameter, when one is to blame.
    public var field: String?
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`).
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ detail: String, field: String? = nil) {
        self.status = status
        self.detail = detail
        self.field = field
    }

    public var description: String { "\(status.code) \(detail)" + (field.map { " (\($0))" } ?? "") }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var body: [String: Any] = [
            "type": "about:blank", "title": status.reasonPhrase, "status": status.code, "detail": detail,
        ]
        if let field { body["field"] = field }
        let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        var headers = self.headers
        headers[.contentType] = "application/problem+json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func badRequest(_ detail: String, field: String? = nil) -> Self { Self(.badRequest, detail, field: field) }
    static func invalid(_ detail: String, field: String) -> Self { Self(.unprocessableContent, detail, field: field) }
    static func notFound(_ detail: String) -> Self { Self(.notFound, detail) }
    static func conflict(_ detail: String) -> Self { Self(.conflict, detail) }
    static func tooManyRequests(_ detail: String, retryAfter: Duration) -> Self {
        var problem = Self(.tooManyRequests, detail)
        problem.headers[.retryAfter] = "\(retryAfter.components.seconds)"
        return problem
    }
}

/// Turns every error a handler throws into a problem response: what the caller did wrong
/// keeps its status, an unreachable database is 503, anything else a logged 500 that says
/// nothing of the cause.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let problem as APIProblem {
            throw problem
        } catch let error as any HTTPResponseError {
            // Hummingbird's and NIO's own refusals: an unknown route, a body over the limit.
            throw APIProblem(error.status, error.status == .contentTooLarge ? "The request body is too large." : error.status.reasonPhrase)
        } catch let error as RevokerStoreError {
            switch error.code {
            case .invalidArgument: throw APIProblem(.unprocessableContent, error.message)
            case .conflict, .historyRewritten: throw APIProblem.conflict(error.message)
            case .notFound: throw APIProblem.notFound(error.message)
            case .database:
                // The detail (SQLSTATE and the server's message) tells a refused statement from a lost connection.
                throw Self.unavailable(context, detail: error.detail)
            default:
                context.logger.error("Store error while serving a request", metadata: ["revoker.error": "\(error.code)"])
                throw APIProblem(.internalServerError, "The request could not be completed.")
            }
        } catch is DeadlineExceeded {
            throw Self.unavailable(context)
        } catch is HTTPParserError {
            // Broken framing (a bad chunk size, a body cut short) is the client's doing.
            context.logger.debug("Malformed request")
            var problem = APIProblem.badRequest("The request is malformed: its body does not match its framing.")
            problem.headers[.connection] = "close"
            throw problem
        } catch is RequestBodyTimeout {
            context.logger.debug("Request body timed out")
            var problem = APIProblem(.requestTimeout, "The request body did not arrive in time.")
            problem.headers[.connection] = "close"
            throw problem
        } catch {
            context.logger.error("Unexpected error while serving a request", metadata: ["revoker.error": "\(type(of: error))"])
            throw APIProblem(.internalServerError, "The request could not be completed.")
        }
    }

    static func unavailable(_ context: Context, detail: String? = nil) -> APIProblem {
        context.logger.warning("Database unavailable while serving a request", metadata: detail.map { ["revoker.error": "\($0)"] } ?? [:])
        var problem = APIProblem(.serviceUnavailable, "The database is unavailable; try again shortly.")
        problem.headers[.retryAfter] = "5"
        return problem
    }
}
