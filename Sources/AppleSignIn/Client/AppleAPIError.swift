import RevokerProvider

/// One of Apple's Sign in with Apple endpoints.
public enum AppleEndpoint: String, Sendable, Hashable, CaseIterable {
    case token = "/auth/token"
    case revoke = "/auth/revoke"
    case keys = "/auth/keys"
}

/// What Apple answered when it did not succeed, or why no answer came: the provider seam's
/// failure, with `endpoint` one of ``AppleEndpoint``'s paths.
public typealias AppleAPIError = ProviderFailure

extension ProviderFailure {
    /// A failure of one of Apple's endpoints.
    public init(
        endpoint: AppleEndpoint,
        classification: Classification,
        httpStatus: Int?,
        error: String? = nil,
        errorDescription: String? = nil,
        retryAfter: Duration? = nil,
        detail: String
    ) {
        self.init(
            endpoint: endpoint.rawValue,
            classification: classification,
            httpStatus: httpStatus,
            error: error,
            errorDescription: errorDescription,
            retryAfter: retryAfter,
            detail: detail
        )
    }

    /// The classification of Apple's `error` code on a 4xx answer.
    public static func classify(providerError code: String) -> Classification {
        switch code {
        case "invalid_grant": .credentialRejected
        case "invalid_client", "unauthorized_client", "unsupported_grant_type": .configurationFault
        default: .requestRejected
        }
    }
}
