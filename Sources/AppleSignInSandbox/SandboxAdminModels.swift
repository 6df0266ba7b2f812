/// Admin request and response bodies (`/sandbox/*`), shared by the server and ``AppleSandboxAdmin``.
public enum SandboxAdmin {
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

    /// `POST /sandbox/codes`, `/sandbox/refresh-tokens`, `/sandbox/access-tokens`: a user signs in.
    public struct Mint: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case subject
            case redirectURI = "redirect_uri"
            case lifetimeSeconds = "lifetime_seconds"
        }
        public var clientID: String
        /// The Apple user id the grant belongs to.
        public var subject: String
        /// Codes only: the redirect_uri the code is bound to.
        public var redirectURI: String?
        /// Codes only: overrides the configured code lifetime.
        public var lifetimeSeconds: Double?
        public init(clientID: String, subject: String, redirectURI: String? = nil, lifetimeSeconds: Double? = nil) {
            self.clientID = clientID
            self.subject = subject
            self.redirectURI = redirectURI
            self.lifetimeSeconds = lifetimeSeconds
        }
    }

    /// The minted code or token and the grant it belongs to.
    public struct Minted: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case value
            case grantID = "grant_id"
        }
        public var value: String
        public var grantID: String
    }

    /// `POST /sandbox/id-tokens`: an identity token signed with the sandbox's current key, for verifier tests.
    public struct IdentityTokenRequest: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case subject
            case audience
            case issuer
            case expiresIn = "expires_in"
        }
        public var subject: String
        public var audience: String
        public var issuer: String?
        /// Seconds from now; negative for an already expired token.
        public var expiresIn: Double?
        public init(subject: String, audience: String, issuer: String? = nil, expiresIn: Double? = nil) {
            self.subject = subject
            self.audience = audience
            self.issuer = issuer
            self.expiresIn = expiresIn
        }
    }

    /// An identity token, or a key id after rotation.
    public struct Value: Codable, Sendable {
        public var value: String
    }
}
