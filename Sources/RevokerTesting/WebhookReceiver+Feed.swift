import Foundation
import RevokerLocalStack
import RevokerStore

extension WebhookReceiver {
    /// `webhooks` and `webhook_delivery` settings that send `clientIDs`' events here from the
    /// start of the feed, retrying fast; an endpoint failing for `park` seconds is parked.
    ///
    /// Checkpoints are taken hourly: a test that a loaded machine stretches past the default
    /// minute would otherwise see a checkpoint's event delivered, and counted in the cursor,
    /// among the requests' events.
    public func settings(name: String, clientIDs: [String], park: Double = 3600) -> [String: any Sendable] {
        let delivery: [String: any Sendable] = [
            "retry_base_seconds": 0.05, "retry_cap_seconds": 0.2, "poll_interval_seconds": 0.2, "from_start": true, "park_after_seconds": park,
        ]
        return [
            "webhooks": [configurationEntry(name: name, clientIDs: clientIDs)], "webhook_delivery": delivery,
            "audit": ["checkpoint_interval_seconds": 3600] as [String: any Sendable],
        ]
    }

    /// The deliveries of requests' events, without the `audit.checkpoint` events each run's
    /// checkpoints add (those are `AuditWitnessTests`' concern).
    public var requestDeliveries: [Delivery] {
        deliveries.filter { $0.type?.hasPrefix("audit.") != true }
    }

    /// The distinct request events accepted (answered 2xx).
    public var acceptedRequestEvents: Set<String> {
        Set(requestDeliveries.filter { (200..<300).contains($0.answered) }.map(\.id))
    }

    /// Waits until `count` distinct request events were accepted.
    public func waitForAccepted(_ count: Int) async throws {
        try await eventually("\(count) events accepted (\(acceptedRequestEvents.count) so far)", every: .milliseconds(100)) {
            acceptedRequestEvents.count >= count
        }
    }
}

extension RevokerTestStack {
    /// The ids of the requests' events of `clientIDs` in feed order, as delivered (lowercase),
    /// without the checkpoints'. Only what the feed shows: an event shows once every older
    /// writing transaction on the server has ended.
    public func requestEventIDs(clientIDs: [String]) async throws -> [String] {
        let feed = EventFeed(client: database.client, logger: logger)
        return try await feed.events(after: nil, clientIDs: clientIDs, limit: 1000).filter { !$0.type.hasPrefix("audit.") }
            .map { $0.id.uuidString.lowercased() }
    }
}
