/// An error raised by the Google Sign-In layer before or after talking to Google: loading an
/// app's client secret, verifying identity tokens and security event tokens.
///
/// Google's own answers are ``ProviderFailure``s. `description` is safe to show and never
/// contains a secret, token or code.
public struct GoogleSignInError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a stable snake_case code.
    public enum Code: String, Sendable, Hashable, CustomStringConvertible {
        /// The client secret file does not exist.
        case clientSecretFileNotFound = "client_secret_file_not_found"
        /// The client secret file exists but cannot be read.
        case clientSecretFileUnreadable = "client_secret_file_unreadable"
        /// The client secret is empty, holds whitespace, or belongs to another client_id.
        case invalidClientSecret = "invalid_client_secret"
        /// The client_id is not one of Google's OAuth client IDs.
        case invalidClientID = "invalid_client_id"
        /// The token is not a well-formed JWS, or its claims are not Google's.
        case malformedIdentityToken = "malformed_identity_token"
        /// The token is signed with another algorithm than RS256.
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// The token names a key Google does not publish, even after a refresh.
        case unknownSigningKey = "unknown_signing_key"
        /// The signature does not verify.
        case invalidSignature = "invalid_signature"
        /// The token was not issued by Google.
        case wrongIssuer = "wrong_issuer"
        /// The token was issued to a client ID that is not the app's.
        case wrongAudience = "wrong_audience"
        /// The token has expired.
        case expiredIdentityToken = "expired_identity_token"
        /// The token's `iat` lies further in the future than the clock skew allows.
        case issuedInFuture = "issued_in_future"
        /// The security event token is not a well-formed JWS, or its claims or events are not Google's.
        case malformedSecurityEvent = "malformed_security_event"
        /// The security event token was issued too long ago to be accepted.
        case expiredSecurityEvent = "expired_security_event"

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
