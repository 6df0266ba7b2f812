/// What a provider answered when it did not succeed, or why no answer came.
///
/// ``classification`` tells the worker what to do; the rest is for the audit trail. Nothing
/// here contains a token, code or client secret: the provider's `error_description` is bounded,
/// stripped of control characters and scrubbed of the values that were sent.
public struct ProviderFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// How a failure should be handled.
    public enum Classification: String, Sendable, Hashable {
        /// The provider rejected this credential for good: expired, used, revoked, or another app's.
        case credentialRejected = "credential_rejected"
        /// Our app's settings are wrong: every request of the app would fail the same way until
        /// someone fixes them, so the app is paused.
        case configurationFault = "configuration_fault"
        /// The provider refused this request as malformed.
        case requestRejected = "request_rejected"
        /// Worth retrying: 5xx, 429, timeouts, dropped connections, bodies a proxy made up.
        case transient
    }

    /// The endpoint that was called, as the audit trail names it (a path such as `/auth/token`).
    public let endpoint: String
    /// How to handle it.
    public let classification: Classification
    /// The HTTP status, when a response arrived.
    public let httpStatus: Int?
    /// The provider's `error` code, when the body carried one.
    public let error: String?
    /// The provider's `error_description`, bounded and scrubbed.
    public let errorDescription: String?
    /// How long the provider asked us to wait (`Retry-After`), when it said.
    public let retryAfter: Duration?
    /// A short safe sentence about what happened, for logs and the audit trail.
    public let detail: String

    public init(
        endpoint: String,
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

    /// A credential of a kind this provider's grants never come as: final for the request, made
    /// without a call.
    public static func unsupportedCredential(endpoint: String, detail: String) -> Self {
        Self(endpoint: endpoint, classification: .requestRejected, httpStatus: nil, error: "unsupported_credential", detail: detail)
    }

    public var description: String {
        var text = "\(endpoint): \(detail)"
        if let errorDescription { text += " (\(errorDescription))" }
        return text
    }
}
