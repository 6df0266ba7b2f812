import Foundation

/// The kind of an audit event (checked by the database).
public struct AuditEventKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// `enqueued`.
    public static let enqueued = Self("enqueued")
    /// `claimed`.
    public static let claimed = Self("claimed")
    /// `token_exchanged`.
    public static let tokenExchanged = Self("token_exchanged")
    /// `token_validated`.
    public static let tokenValidated = Self("token_validated")
    /// `id_token_verified`.
    public static let idTokenVerified = Self("id_token_verified")
    /// `id_token_mismatch`.
    public static let idTokenMismatch = Self("id_token_mismatch")
    /// `revoked`.
    public static let revoked = Self("revoked")
    /// `retry_scheduled`.
    public static let retryScheduled = Self("retry_scheduled")
    /// `rescued`.
    public static let rescued = Self("rescued")
    /// `released`.
    public static let released = Self("released")
    /// `failed`.
    public static let failed = Self("failed")
    /// `succeeded`.
    public static let succeeded = Self("succeeded")
    /// `cancelled`.
    public static let cancelled = Self("cancelled")
    /// `credential_erased`.
    public static let credentialErased = Self("credential_erased")
    /// `credential_sealed`.
    public static let credentialSealed = Self("credential_sealed")
    /// `requeued`.
    public static let requeued = Self("requeued")
    /// `app_paused`.
    public static let appPaused = Self("app_paused")
    /// `app_resumed`.
    public static let appResumed = Self("app_resumed")
    /// An Apple error answer worth recording on its own.
    public static let appleError = Self("apple_error")
    /// A free-form note (detail says what).
    public static let note = Self("note")

    /// All kinds.
    public static let all: [AuditEventKind] = [
        .enqueued, .claimed, .tokenExchanged, .tokenValidated, .idTokenVerified, .idTokenMismatch, .revoked,
        .retryScheduled, .rescued, .released, .failed, .succeeded, .cancelled, .credentialErased, .credentialSealed,
        .requeued, .appPaused, .appResumed, .appleError, .note,
    ]
    public var description: String { self.rawValue }
}

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
