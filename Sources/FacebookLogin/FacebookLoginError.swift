/// An error raised by the Facebook Login layer before or after talking to Facebook: loading an
/// app's secret, verifying `signed_request`s and Limited Login tokens.
///
/// Facebook's own answers are ``ProviderFailure``s. `description` is safe to show and never
/// contains a secret, token or signed request.
public struct FacebookLoginError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a stable snake_case code.
    public enum Code: String, Sendable, Hashable, CustomStringConvertible {
        /// The app secret file does not exist.
        case appSecretFileNotFound = "app_secret_file_not_found"
        /// The app secret file exists but cannot be read.
        case appSecretFileUnreadable = "app_secret_file_unreadable"
        /// The app secret is empty or holds characters Facebook's secrets do not have.
        case invalidAppSecret = "invalid_app_secret"
        /// The app id is not a Facebook app id (digits).
        case invalidAppID = "invalid_app_id"
        /// The `signed_request` is not two base64url parts, or its payload is not the JSON object Facebook sends.
        case malformedSignedRequest = "malformed_signed_request"
        /// The payload names another algorithm than HMAC-SHA256.
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// The signature does not verify with the app's secret.
        case invalidSignature = "invalid_signature"
        /// The `signed_request` was issued too long ago, or in the future.
        case staleSignedRequest = "stale_signed_request"
        /// The token is not a well-formed JWS, or its claims are not Limited Login's.
        case malformedIdentityToken = "malformed_identity_token"
        /// The token names a key Facebook does not publish, even after a refresh.
        case unknownSigningKey = "unknown_signing_key"
        /// The token was not issued by Facebook.
        case wrongIssuer = "wrong_issuer"
        /// The token was issued to another app.
        case wrongAudience = "wrong_audience"
        /// The token has expired.
        case expiredIdentityToken = "expired_identity_token"
        /// The token's `iat` lies further in the future than the clock skew allows.
        case issuedInFuture = "issued_in_future"
        /// The token's `nonce` is not the one the sign-in was started with.
        case wrongNonce = "wrong_nonce"

        public var description: String { rawValue }
    }

    /// The stable code.
    public let code: Code
    /// A sentence for people: what is wrong and where. Never holds a secret.
    public let message: String

    /// Creates an error; `message` must not contain secrets.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
