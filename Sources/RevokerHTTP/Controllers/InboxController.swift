import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RevokerProvider
import RevokerStore
import Tracing

/// Every provider's inbox (``ProviderInbox``) on its own routes: read the body, have the
/// provider verify it, store it, answer in the provider's own shape.
///
/// No API key: a provider cannot send one; the message's signature is its authentication. The
/// answer that it was received comes only once the message is committed (a replayed `jti`
/// changes nothing); a database or key-fetch failure is 503, so that a retrying sender tries
/// again; a refusal repeats nothing of the token.
struct InboxController {
    let inboxes: [any ProviderInbox]
    let messages: ProviderMessages
    let metrics: APIMetrics
    let store: DatabaseDeadline
    /// The status page of an erasure request a message opened.
    let statusURL: @Sendable (_ code: String, _ request: Request) -> String

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        for inbox in inboxes {
            for route in inbox.routes {
                group.post(RouterPath(route)) { request, context in
                    try await receive(request, context: context, inbox: inbox)
                }
            }
        }
    }

    /// Each message is a span (`notification received`) with the provider, what became of it and,
    /// once verified, its type and app: never the token itself.
    func receive(_ request: Request, context: APIRequestContext, inbox: some ProviderInbox) async throws -> Response {
        try await withSpan("notification received", ofKind: .consumer) { span in
            span.attributes["revoker.provider"] = inbox.provider.rawValue
            return try await receive(request, context: context, inbox: inbox, span: span)
        }
    }

    private func receive(_ request: Request, context: APIRequestContext, inbox: some ProviderInbox, span: any Span) async throws -> Response {
        if let reason = inbox.closedReason { throw APIProblem.notFound(reason) }
        let result = { (result: String) in
            metrics.inboxMessage(inbox.metricLabel, result: result)
            span.attributes["revoker.notification.result"] = result
        }
        // The body is read apart from verifying: too large is the sender's malformed body, broken
        // framing (400) or a body too slow (408) the sender's doing, never a key failure.
        let limit = inbox.maximumBodyBytes
        let body: [UInt8]
        do {
            body = try await request.bodyBytes(upTo: limit, tooLarge: APIProblem.badRequest("larger than \(limit) bytes"))
        } catch let problem as APIProblem {
            result("malformed_body")
            return try refusal(.malformedBody("The body is \(problem.detail)."), inbox: inbox)
        }
        let message: ProviderMessage
        do {
            message = try await inbox.receive(body, clientID: context.parameters.get("client_id"))
        } catch let refusal as InboxRefusal {
            result(refusal.code)
            context.logger.notice(
                "Refused a provider's message that does not verify",
                metadata: ["revoker.provider": "\(inbox.provider)", "revoker.error": "\(refusal.code)"]
            )
            return try self.refusal(refusal, inbox: inbox)
        } catch {
            // The provider's keys could not be fetched (or not yet for this key): not the sender's fault.
            result("keys_unavailable")
            context.logger.warning("Could not fetch a provider's keys to verify its message", metadata: ["revoker.provider": "\(inbox.provider)"])
            var problem = APIProblem(.serviceUnavailable, "\(inbox.source.sender)'s signing keys cannot be fetched right now; try again shortly.")
            let wait = (error as? ProviderFailure)?.retryAfter.map { Int(($0 + .milliseconds(999)).components.seconds) }
            problem.headers[.retryAfter] = "\(max(wait ?? 5, 1))"
            throw problem
        }
        span.attributes["revoker.client_id"] = message.clientID
        span.attributes["revoker.notification.type"] = message.type
        let receipt: MessageReceipt
        do {
            receipt = try await store { [messages, logger = context.logger] in
                try await messages.receive(message, from: inbox.source, logger: logger)
            }
        } catch {
            result("unavailable")
            throw error
        }
        switch receipt {
        case .accepted(let ended):
            result("accepted")
            context.logger.info(
                "Accepted a provider's message",
                metadata: [
                    "revoker.provider": "\(inbox.provider)", "revoker.client_id": "\(message.clientID)", "revoker.message.type": "\(message.type)",
                    "revoker.requests_ended": "\(ended)",
                ]
            )
        case .duplicate:
            result("duplicate")
            context.logger.debug(
                "A provider's message arrived again",
                metadata: ["revoker.provider": "\(inbox.provider)", "revoker.client_id": "\(message.clientID)"]
            )
        }
        // The request the message opened, the same for every receipt of it.
        var erasure: InboxReceipt.Erasure?
        if message.opensErasure {
            let code = try await store { [messages, id = message.id, provider = inbox.provider, logger = context.logger] in
                try await messages.erasureCode(of: id, from: provider, logger: logger)
            }
            guard let code else { throw APIProblem(.serviceUnavailable, "The request was stored without its code; try again.") }
            erasure = InboxReceipt.Erasure(code: code, statusURL: statusURL(code, request))
        }
        return Self.response(inbox.accepted(InboxReceipt(duplicate: receipt == .duplicate, erasure: erasure)))
    }

    /// The provider's own refusal, or the API's problem naming the field.
    func refusal(_ refusal: InboxRefusal, inbox: some ProviderInbox) throws -> Response {
        guard let answer = inbox.refused(refusal) else { throw APIProblem.badRequest(refusal.message, field: refusal.field) }
        var response = Self.response(answer)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    static func response(_ answer: InboxAnswer) -> Response {
        var headers: HTTPFields = [:]
        if let type = answer.contentType { headers[.contentType] = type }
        return Response(
            status: HTTPResponse.Status(code: answer.status),
            headers: headers,
            body: answer.body.isEmpty ? .init() : .init(byteBuffer: ByteBuffer(bytes: answer.body))
        )
    }
}
