import ProviderSandbox

/// Apple's admin request and response bodies (`/sandbox/*`), shared by the server and ``AppleSandboxAdmin``.
extension SandboxAdmin {
    /// `POST /sandbox/apps`: registers an app and the public half of its key.
    public struct RegisterApp: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case teamID = "team_id"
            case keyID = "key_id"
            case publicKeyPEM = "public_key_pem"
        }
        public var clientID: String
        public var teamID: String
        public var keyID: String
        public var publicKeyPEM: String
        public init(clientID: String, teamID: String, keyID: String, publicKeyPEM: String) {
            self.clientID = clientID
            self.teamID = teamID
            self.keyID = keyID
            self.publicKeyPEM = publicKeyPEM
        }
    }

    /// `POST /sandbox/id-tokens`: an identity token signed with the sandbox's current key, for verifier tests.
    public struct IdentityTokenRequest: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case subject
            case audience
            case issuer
            case expiresIn = "expires_in"
            case bend
        }
        public var subject: String
        public var audience: String
        public var issuer: String?
        /// Seconds from now; negative for an already expired token.
        public var expiresIn: Double?
        /// Bent in a way a strict verifier refuses; as Apple signs when nil.
        public var bend: SandboxTokenBend?
        public init(subject: String, audience: String, issuer: String? = nil, expiresIn: Double? = nil, bend: SandboxTokenBend? = nil) {
            self.subject = subject
            self.audience = audience
            self.issuer = issuer
            self.expiresIn = expiresIn
            self.bend = bend
        }
    }
}

extension SandboxAdmin {
    /// `POST /sandbox/notifications`: Apple tells an app's endpoint what a user did. The sandbox
    /// signs the notification with its identity-token key (as Apple does) and POSTs
    /// `{"payload": "<JWS>"}` to `url`; a `variant` other than `genuine` sends one that a
    /// correct receiver refuses.
    public struct Notification: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case url
            case clientID = "client_id"
            case subject, type, email
            case isPrivateEmail = "is_private_email"
            case variant
        }
        /// Where to POST it (Revoker's `/v1/apple/notifications`).
        public var url: String
        public var clientID: String
        /// The Apple user id the event is about.
        public var subject: String
        /// `consent-revoked`, `account-delete` (or `account-deleted`), `email-disabled`, `email-enabled`.
        public var type: String
        public var email: String?
        /// Sent as the string "true"/"false", as Apple often does.
        public var isPrivateEmail: Bool?
        public var variant: NotificationVariant?

        public init(
            url: String,
            clientID: String,
            subject: String,
            type: String,
            email: String? = nil,
            isPrivateEmail: Bool? = nil,
            variant: NotificationVariant? = nil
        ) {
            self.url = url
            self.clientID = clientID
            self.subject = subject
            self.type = type
            self.email = email
            self.isPrivateEmail = isPrivateEmail
            self.variant = variant
        }
    }

    /// How a sent notification is made.
    public enum NotificationVariant: String, Codable, Sendable, CaseIterable {
        /// Signed with the published key, every claim right.
        case genuine
        /// Signed with a key Apple does not publish, under the published key's `kid`.
        case forged
        /// Signed with a key Apple does not publish, under its own `kid`.
        case unknownKey = "unknown_kid"
        /// `alg: none`, no signature.
        case algorithmNone = "alg_none"
        /// HS256 keyed with the published public key (the algorithm-confusion attack).
        case hmacWithPublicKey = "hs256_public_key"
        /// `exp` an hour ago, `iat` two days ago.
        case expired
        /// `iat` an hour from now.
        case issuedInFuture = "future_iat"
        /// `aud` another app.
        case wrongAudience = "wrong_aud"
        /// `iss` another issuer.
        case wrongIssuer = "wrong_iss"
        /// `events` an object instead of a JSON string.
        case malformedEvents = "malformed_events"
        /// A `crit` header parameter (``SandboxTokenBend``).
        case criticalHeader = "crit_header"
        /// `==` after the signature.
        case paddedSignature = "padded_signature"
        /// A period after the signature.
        case trailingPeriod = "trailing_period"
        /// The signature's last character with its unused bits set.
        case nonCanonicalSignature = "noncanonical_signature"

        /// The bend of a bent variant.
        var bend: SandboxTokenBend? { SandboxTokenBend(rawValue: rawValue) }
    }

    /// `POST /sandbox/notifications/replay`: sends a notification sent before again, byte for byte.
    public struct Replay: Codable, Sendable {
        public var jti: String
        /// Where to send it; where it went first when absent.
        public var url: String?
        public init(jti: String, url: String? = nil) {
            self.jti = jti
            self.url = url
        }
    }

    /// What the receiver answered.
    public struct NotificationDelivery: Codable, Sendable {
        public var jti: String
        /// The receiver's HTTP status.
        public var status: Int
        /// The receiver's body (at most 4 KiB).
        public var body: String
    }
}
