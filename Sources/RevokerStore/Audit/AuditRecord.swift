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
    /// The user's id at the provider (`sub`), when known.
    public var userID: String?
    /// Event kind (raw value of ``AuditEventKind``).
    public var event: String
    /// The request's attempt counter when written.
    public var attempt: Int?
    /// Who: a worker id, an operator, or `sql:<role>`.
    public var actor: String
    /// The provider's endpoint path, when the event is a provider call.
    public var providerEndpoint: String?
    /// HTTP status of the provider's answer.
    public var httpStatus: Int?
    /// The provider's OAuth `error`.
    public var providerError: String?
    /// The provider's `error_description`.
    public var providerErrorDescription: String?
    /// Latency of the provider call.
    public var latencyMilliseconds: Int?
    /// Short detail text.
    public var detail: String?
}
