/// One of Apple's Sign in with Apple endpoints.
public enum AppleEndpoint: String, Sendable, Hashable, CaseIterable {
    case token = "/auth/token"
    case revoke = "/auth/revoke"
    case keys = "/auth/keys"
}

/// What Apple answered when it did not succeed, or why no answer came.
///
/// ``classification`` tells the worker what to do; the rest is for the audit trail.
/// Nothing here contains a token, code or client secret: Apple's `error_description` is
/// bounded, stripped of control characters and scrubbed of the values that were sent.
public struct AppleAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// How a failure should be handled.
    public enum Classification: String, Sendable, Hashable {
        /// Apple rejected this credential for good (`invalid_grant`): expired, used, revoked, or another app's.
        case credentialRejected = "credential_rejected"
        /// Our app's settings are wrong (`invalid_client`, `unauthorized_client`, `unsupported_grant_type`):
        /// every request of the app would fail the same way until someone fixes them.
        case configurationFault = "configuration_fault"
        /// Apple refused this request as malformed (`invalid_request`, `invalid_scope`, an unknown error code).
        case requestRejected = "request_rejected"
        /// Worth retrying: 5xx, 429, timeouts, dropped connections, bodies a proxy made up.
        case transient
    }

    /// The endpoint that was called.
    public let endpoint: AppleEndpoint
    /// How to handle it.
    public let classification: Classification
    /// The HTTP status, when a response arrived.
    public let httpStatus: Int?
    /// Apple's `error` code, when the body carried one.
    public let error: String?
    /// Apple's `error_description`, bounded and scrubbed.
    public let errorDescription: String?
    /// How long Apple asked us to wait (`Retry-After`), when it said.
    public let retryAfter: Duration?
    /// A short safe sentence about what happened, for logs and the audit trail.
    public let detail: String

    public init(
        endpoint: AppleEndpoint,
        classification: Classification,
        httpStatus: Int?,
        error: String? = nil,
        errorDescription: String? = nil,
        retryAfter: Duration? = nil,
        detail: String
    ) {
        self.endpoint = endpoint
        self.classification = classification
        self.httpStatus = httpStatus
        self.error = error
        self.errorDescription = errorDescription
        self.retryAfter = retryAfter
        self.detail = detail
    }

    public var description: String {
        var text = "Apple \(endpoint.rawValue): \(detail)"
        if let errorDescription { text += " (\(errorDescription))" }
        return text
    }

    /// The classification of Apple's `error` code on a 4xx answer.
    public static func classify(appleError code: String) -> Classification {
        switch code {
        case "invalid_grant": .credentialRejected
        case "invalid_client", "unauthorized_client", "unsupported_grant_type": .configurationFault
        default: .requestRejected
        }
    }
}
