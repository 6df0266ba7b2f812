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

/// `/v1/events`: the event feed, and where each webhook endpoint stands.
struct EventsController {
    let feed: EventFeed
    let deliveries: WebhookDeliveries
    /// Each webhook endpoint's apps, by endpoint name.
    let webhookApps: [String: Set<String>]
    let keys: APIKeys
    let store: DatabaseDeadline

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.get("events") { request, context in try await eventFeed(request, context: context) }
        group.get("events/deliveries") { request, context in try await webhookDeliveries(request, context: context) }
    }

    func eventFeed(_ request: Request, context: APIRequestContext) async throws -> Response {
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
        let events = try await store { [feed, cursor, clientIDs, logger = context.logger] in
            try await feed.events(after: cursor, clientIDs: clientIDs, limit: limit, logger: logger)
        }
        // The cursor to continue from: the last event's, or the one given when nothing is new.
        let next = events.last?.cursor ?? cursor
        var headers: HTTPFields = [.contentType: "application/json"]
        if let next { headers[APIResponse.nextCursorHeader] = next.description }
        let text =
            "{\"events\":[\(events.map(\.json).joined(separator: ","))],\"next_cursor\":\(next.map { WireFormat.jsonString($0.description) } ?? "null")}"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Where each webhook endpoint stands; a key limited to apps sees the endpoints that serve only its apps.
    func webhookDeliveries(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .eventsRead)
        _ = try QueryInput(request, allowed: [])
        let states = try await store { [deliveries, logger = context.logger] in try await deliveries.states(logger: logger) }.filter { state in
            guard let reachable = caller.clientIDs else { return true }
            return webhookApps[state.endpoint].map { !$0.isEmpty && $0.isSubset(of: reachable) } ?? false
        }
        let text = "{\"deliveries\":[\(states.map(\.json).joined(separator: ","))]}"
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
