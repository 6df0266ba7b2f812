import Foundation
import RevokerEvidence
import RevokerProvider

/// One event for the app backend, as the outbox holds it: a request's final outcome, a grant's or
/// a deletion's, a checkpoint, or a provider's message. Never holds a credential.
public struct OutboxEvent: Sendable, Equatable {
    /// Unique; the `webhook-id` of every delivery of this event, so receivers can drop repeats.
    public var id: UUID
    /// One of ``types``: a request's end (`revocation.*`, or `grant.*` for a grant taken into
    /// custody or not), a checkpoint (`audit.*`), a deletion (`account.*`); or a provider's
    /// message, `<provider>.<what>` as its plug-in names it.
    public var type: String
    public var clientID: String
    /// When the change it reports committed.
    public var occurredAt: Date
    /// Its place in the feed.
    public var cursor: EventCursor
    public var requestID: UUID?
    public var externalReference: String?
    /// The user's id at the provider; named for Apple, the first provider.
    public var userID: String?
    /// The sign-in provider of the request or notification (nil for events written before providers).
    public var provider: String?
    /// The request's outcome (`revocation.*`).
    public var outcome: String?
    /// The last error's code (`revocation.failed`).
    public var errorCode: String?
    /// The provider's id of its message (a `jti`).
    public var notificationID: String?
    /// When the user acted, by the provider's clock (a provider's message).
    public var eventTime: Date?
    /// The signed checkpoint as a JSON object (`audit.checkpoint`), for the backend to keep as
    /// a witness: `revoker audit verify --witness` reads these events as they were received.
    public var checkpoint: String?
    /// The grant a `grant.*` event is about.
    public var grantID: UUID?
    /// The account deletion as a JSON object (`account.*`): its id, reference, state and
    /// outcome, and this app's grants and requests with their fate.
    public var deletion: String? = nil
    /// The code of the erasure request a provider's message opened: the backend decides it with it.
    public var erasureCode: String? = nil
    /// The trace of the request or deletion the event reports (its `traceparent`), for the
    /// webhook delivery to continue; never part of the event's JSON.
    public var traceParent: TraceParent? = nil

    /// Revoker's own types; a provider's message adds the type its plug-in names
    /// (`ProviderMessage.eventType`, `<provider>.<what>`).
    public static let types = [
        "revocation.succeeded", "revocation.failed", "revocation.cancelled",
        "audit.checkpoint", "audit.checkpoint_refused", "grant.held", "grant.failed",
        "account.deletion_requested", "account.deletion_completed", "database.write_lost",
    ]

    /// The event as one JSON object, the same for `GET /v1/events`, `revoker events` and webhook
    /// bodies: `id`, `type`, `timestamp`, `client_id`, `cursor` and the event's `data`.
    public var json: String {
        var data: [(String, String)] = []
        func add(_ key: String, _ value: String?) {
            if let value { data.append((key, WireFormat.jsonString(value))) }
        }
        add("provider", provider)
        add("request_id", requestID?.uuidString.lowercased())
        add("grant_id", grantID?.uuidString.lowercased())
        add("external_reference", externalReference)
        // Apple's events keep the field they always had; another provider's user is `user_id`.
        add((provider ?? "apple") == "apple" ? "apple_user_id" : "user_id", userID)
        add("outcome", outcome)
        add("error_code", errorCode)
        add("notification_id", notificationID)
        add("event_time", eventTime.map(WireFormat.timestamp))
        add("erasure_code", erasureCode)
        // Already JSON (PostgreSQL's jsonb text): embedded as it is.
        if let checkpoint { data.append(("checkpoint", checkpoint)) }
        if let deletion { data.append(("deletion", deletion)) }
        let members = [
            ("id", WireFormat.jsonString(id.uuidString.lowercased())),
            ("type", WireFormat.jsonString(type)),
            ("timestamp", WireFormat.jsonString(WireFormat.timestamp(occurredAt))),
            ("client_id", WireFormat.jsonString(clientID)),
            ("cursor", WireFormat.jsonString(cursor.description)),
            ("data", WireFormat.jsonObject(data)),
        ]
        return WireFormat.jsonObject(members)
    }
}

/// A place in the event feed: the writing transaction's id and the event's position in it.
/// Written `TXID-POSITION`; opaque to readers.
public struct EventCursor: Sendable, Hashable, Comparable, LosslessStringConvertible {
    public var transaction: UInt64
    public var position: Int64

    public init(transaction: UInt64, position: Int64) {
        self.transaction = transaction
        self.position = position
    }

    public init?(_ description: String) {
        let parts = description.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.count <= 20 && $0.allSatisfy(\.isASCII) }),
            let transaction = UInt64(parts[0]), let position = Int64(parts[1]), position >= 0
        else { return nil }
        self.init(transaction: transaction, position: position)
    }

    public var description: String { "\(transaction)-\(position)" }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.transaction, lhs.position) < (rhs.transaction, rhs.position)
    }
}
