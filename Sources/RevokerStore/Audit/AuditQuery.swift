import Foundation
import Logging
import PostgresNIO

/// A query over the audit trail. All filters combine with AND.
public struct AuditQuery: Sendable, Hashable {
    /// Only events of this request.
    public var requestID: UUID?
    /// Only events with this external reference.
    public var externalReference: String?
    /// Only events of this app.
    public var clientID: String?
    /// Only events of these apps (an API key's limit), when set.
    public var clientIDs: [String]?
    /// Only events with this user id (the provider's `sub`).
    public var userID: String?
    /// Inclusive lower bound of `occurred_at`.
    public var from: Date?
    /// Exclusive upper bound of `occurred_at`.
    public var to: Date?
    /// Only these event kinds.
    public var events: [AuditEventKind]?
    /// The `nextCursor` of the previous page.
    public var cursor: String?
    /// Page size, 1...1000.
    public var limit: Int

    /// Creates a query.
    public init(
        requestID: UUID? = nil,
        externalReference: String? = nil,
        clientID: String? = nil,
        userID: String? = nil,
        from: Date? = nil,
        to: Date? = nil,
        events: [AuditEventKind]? = nil,
        cursor: String? = nil,
        limit: Int = 100
    ) {
        self.requestID = requestID
        self.externalReference = externalReference
        self.clientID = clientID
        self.userID = userID
        self.from = from
        self.to = to
        self.events = events
        self.cursor = cursor
        self.limit = limit
    }
}
