import Foundation
import RevokerProvider

/// An audit event to write for a request (request id, client id, references and attempt are
/// filled in by the store). Text fields are truncated to the database's bounds. Never put a
/// token or code in any field.
public struct AuditEvent: Sendable, Hashable {
    /// What happened.
    public var event: AuditEventKind
    /// The provider's endpoint path called, e.g. `/auth/token`.
    public var providerEndpoint: String?
    /// HTTP status of the provider's answer.
    public var httpStatus: Int?
    /// The provider's OAuth `error` value.
    public var providerError: String?
    /// The provider's `error_description` (truncated to 500 characters).
    public var providerErrorDescription: String?
    /// How long the provider call took.
    public var latency: Duration?
    /// Short detail text (truncated to 500 characters), no secrets.
    public var detail: String?

    /// Creates an event draft.
    public init(
        _ event: AuditEventKind,
        providerEndpoint: String? = nil,
        httpStatus: Int? = nil,
        providerError: String? = nil,
        providerErrorDescription: String? = nil,
        latency: Duration? = nil,
        detail: String? = nil
    ) {
        self.event = event
        self.providerEndpoint = providerEndpoint.map { String($0.prefix(200)) }
        self.httpStatus = httpStatus.flatMap { (100...599).contains($0) ? $0 : nil }
        self.providerError = providerError.map { String($0.prefix(100)) }
        self.providerErrorDescription = providerErrorDescription.map { String($0.prefix(500)) }
        self.latency = latency
        self.detail = detail.map { String($0.prefix(500)) }
    }

    var latencyMilliseconds: Int? {
        guard let latency else { return nil }
        return Int(clamping: max(0, min(latency.milliseconds, Int64(Int32.max))))
    }
}
