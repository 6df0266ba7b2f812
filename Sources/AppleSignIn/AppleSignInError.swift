/// An error raised by the Sign in with Apple layer before or after talking to Apple:
/// loading keys, validating app settings, signing client secrets, verifying identity tokens
/// and server-to-server notifications.
///
/// Apple's own answers are ``AppleAPIError``. `description` is safe to show to a user and
/// never contains a key, token or code.
public struct AppleSignInError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a stable code that can grow without breaking callers.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case keyFileNotFound = "key_file_not_found"
            case keyFileUnreadable = "key_file_unreadable"
            case malformedKey = "malformed_key"
            case wrongKeyType = "wrong_key_type"
            case invalidTeamID = "invalid_team_id"
            case invalidKeyID = "invalid_key_id"
            case invalidClientID = "invalid_client_id"
            case invalidSecretLifetime = "invalid_secret_lifetime"
            case signingFailed = "signing_failed"
            case malformedIdentityToken = "malformed_identity_token"
            case unknownSigningKey = "unknown_signing_key"
            case invalidSignature = "invalid_signature"
            case wrongIssuer = "wrong_issuer"
            case wrongAudience = "wrong_audience"
            case expiredIdentityToken = "expired_identity_token"
            case unsupportedAlgorithm = "unsupported_algorithm"
            case malformedNotification = "malformed_notification"
            case issuedInFuture = "issued_in_future"
            case expiredNotification = "expired_notification"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The key file does not exist.
        public static let keyFileNotFound = Code(.keyFileNotFound)
        /// The key file exists but cannot be read.
        public static let keyFileUnreadable = Code(.keyFileUnreadable)
        /// The PEM text is damaged (escaped or lost line breaks, bad base64, wrong armour).
        public static let malformedKey = Code(.malformedKey)
        /// The PEM holds something other than a P-256 private key.
        public static let wrongKeyType = Code(.wrongKeyType)
        /// The Team ID is not ten upper-case letters and digits.
        public static let invalidTeamID = Code(.invalidTeamID)
        /// The Key ID is not ten upper-case letters and digits.
        public static let invalidKeyID = Code(.invalidKeyID)
        /// The client_id is empty or contains whitespace.
        public static let invalidClientID = Code(.invalidClientID)
        /// The requested client-secret lifetime is not positive or exceeds Apple's maximum.
        public static let invalidSecretLifetime = Code(.invalidSecretLifetime)
        /// The client secret could not be signed.
        public static let signingFailed = Code(.signingFailed)
        /// The identity token is not a well-formed JWS.
        public static let malformedIdentityToken = Code(.malformedIdentityToken)
        /// The identity token names a key that Apple's key set does not hold, even after a refresh.
        public static let unknownSigningKey = Code(.unknownSigningKey)
        /// The identity token's signature does not verify.
        public static let invalidSignature = Code(.invalidSignature)
        /// The identity token was not issued by Apple.
        public static let wrongIssuer = Code(.wrongIssuer)
        /// The identity token was issued to another client_id.
        public static let wrongAudience = Code(.wrongAudience)
        /// The identity token has expired.
        public static let expiredIdentityToken = Code(.expiredIdentityToken)
        /// The token is signed with another algorithm than RS256 (`none` and HS256 among them).
        public static let unsupportedAlgorithm = Code(.unsupportedAlgorithm)
        /// The notification is not a well-formed JWS, or its claims or events are not Apple's.
        public static let malformedNotification = Code(.malformedNotification)
        /// The notification's `iat` lies further in the future than the clock skew allows.
        public static let issuedInFuture = Code(.issuedInFuture)
        /// The notification has expired (`exp`), or was issued longer ago than accepted.
        public static let expiredNotification = Code(.expiredNotification)

        public var description: String { base.rawValue }
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
