import Foundation

/// An audit event to write for a request (request id, client id, references and attempt are
/// filled in by the store). Text fields are truncated to the database's bounds. Never put a
/// token or code in any field.
public struct AuditEvent: Sendable, Hashable {
    /// What happened.
    public var event: AuditEventKind
    /// Apple endpoint path called, e.g. `/auth/token`.
    public var appleEndpoint: String?
    /// HTTP status of Apple's answer.
    public var httpStatus: Int?
    /// Apple's `error` value.
    public var appleError: String?
    /// Apple's `error_description` (truncated to 500 characters).
    public var appleErrorDescription: String?
    /// How long the Apple call took.
    public var latency: Duration?
    /// Short detail text (truncated to 500 characters), no secrets.
    public var detail: String?

    /// Creates an event draft.
    public init(
        _ event: AuditEventKind,
        appleEndpoint: String? = nil,
        httpStatus: Int? = nil,
        appleError: String? = nil,
        appleErrorDescription: String? = nil,
        latency: Duration? = nil,
        detail: String? = nil
    ) {
        self.event = event
        self.appleEndpoint = appleEndpoint.map { String($0.prefix(200)) }
        self.httpStatus = httpStatus.flatMap { (100...599).contains($0) ? $0 : nil }
        self.appleError = appleError.map { String($0.prefix(100)) }
        self.appleErrorDescription = appleErrorDescription.map { String($0.prefix(500)) }
        self.latency = latency
        self.detail = detail.map { String($0.prefix(500)) }
    }

    var latencyMilliseconds: Int? {
        guard let latency else { return nil }
        let (seconds, attoseconds) = latency.components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int(clamping: max(0, min(ms, Int64(Int32.max))))
    }
}
