import Foundation

/// A stored audit row.
public struct AuditRecord: Sendable, Hashable, Identifiable {
    /// Row id (monotonic per insert).
    public var id: Int64
    /// Database `clock_timestamp()` at insert.
    public var occurredAt: Date
    /// The request, if the event is about one (kept after the request is pruned).
    public var requestID: UUID?
    /// The app.
    public var clientID: String?
    /// The enqueuer's reference.
    public var externalReference: String?
    /// Apple's user id, when known.
    public var appleUserID: String?
    /// Event kind (raw value of ``AuditEventKind``).
    public var event: String
    /// The request's attempt counter when written.
    public var attempt: Int?
    /// Who: a worker id, an operator, or `sql:<role>`.
    public var actor: String
    /// Apple endpoint path, when the event is an Apple call.
    public var appleEndpoint: String?
    /// HTTP status of Apple's answer.
    public var httpStatus: Int?
    /// Apple's `error`.
    public var appleError: String?
    /// Apple's `error_description`.
    public var appleErrorDescription: String?
    /// Latency of the Apple call.
    public var latencyMilliseconds: Int?
    /// Short detail text.
    public var detail: String?
}
