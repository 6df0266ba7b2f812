import Foundation

/// The kind of an audit event (checked by the database).
public struct AuditEventKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    public static let enqueued = Self("enqueued")
    public static let claimed = Self("claimed")
    public static let tokenExchanged = Self("token_exchanged")
    public static let tokenValidated = Self("token_validated")
    public static let idTokenVerified = Self("id_token_verified")
    public static let idTokenMismatch = Self("id_token_mismatch")
    public static let revoked = Self("revoked")
    public static let retryScheduled = Self("retry_scheduled")
    public static let rescued = Self("rescued")
    public static let released = Self("released")
    public static let failed = Self("failed")
    public static let succeeded = Self("succeeded")
    public static let cancelled = Self("cancelled")
    public static let credentialErased = Self("credential_erased")
    public static let credentialSealed = Self("credential_sealed")
    public static let requeued = Self("requeued")
    public static let appPaused = Self("app_paused")
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
    public var event: AuditEventKind
    /// Apple endpoint path called, e.g. `/auth/token`.
    public var appleEndpoint: String?
    public var httpStatus: Int?
    /// Apple's `error` value.
    public var appleError: String?
    /// Apple's `error_description` (truncated to 500 characters).
    public var appleErrorDescription: String?
    public var latency: Duration?
    /// Short detail text (truncated to 500 characters), no secrets.
    public var detail: String?

    /// Creates an event draft.
    public init(
        _ event: AuditEventKind, appleEndpoint: String? = nil, httpStatus: Int? = nil, appleError: String? = nil,
        appleErrorDescription: String? = nil, latency: Duration? = nil, detail: String? = nil
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
    public var id: Int64
    public var occurredAt: Date
    public var requestID: UUID?
    public var clientID: String?
    public var externalReference: String?
    public var appleUserID: String?
    public var event: String
    public var attempt: Int?
    public var actor: String
    public var appleEndpoint: String?
    public var httpStatus: Int?
    public var appleError: String?
    public var appleErrorDescription: String?
    public var latencyMilliseconds: Int?
    public var detail: String?
}
