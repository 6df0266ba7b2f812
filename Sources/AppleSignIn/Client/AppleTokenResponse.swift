/// A successful answer from `/auth/token`.
///
/// Holds live tokens: its `description` shows which fields are present, never their values.
public struct AppleTokenResponse: Sendable, Decodable, CustomStringConvertible, CustomDebugStringConvertible {
    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
    }

    /// The access token (valid for an hour).
    public let accessToken: String
    /// Always `Bearer`.
    public let tokenType: String
    /// Seconds until the access token expires.
    public let expiresIn: Int?
    /// Present when a code was exchanged; absent when a refresh token was validated.
    public let refreshToken: String?
    /// The identity token (a JWS signed by Apple), when Apple sent one.
    public let idToken: String?

    public init(accessToken: String, tokenType: String = "Bearer", expiresIn: Int? = nil, refreshToken: String? = nil, idToken: String? = nil) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    public var description: String {
        "AppleTokenResponse(access_token: redacted, refresh_token: \(refreshToken == nil ? "absent" : "redacted"), id_token: \(idToken == nil ? "absent" : "present"))"
    }

    public var debugDescription: String { description }
}

/// Which kind of token `/auth/revoke` is given.
public enum TokenTypeHint: String, Sendable, Hashable {
    case refreshToken = "refresh_token"
    case accessToken = "access_token"
}
