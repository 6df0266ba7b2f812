import AsyncHTTPClient
import Foundation
import GoogleSignIn
import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox

/// Drives a running Google sandbox's admin surface over HTTP: what tests, the demo and the
/// benchmark use. `baseURL` is where the sandbox's routes start (`…/google` when it is served
/// beside the Apple sandbox). The calls every sandbox answers alike come from ``SandboxAdminClient``.
public struct GoogleSandboxAdmin: SandboxAdminClient {
    public let baseURL: String
    public let httpClient: HTTPClient

    public init(baseURL: String, httpClient: HTTPClient = .shared) {
        self.baseURL = baseURL
        self.httpClient = httpClient
    }

    /// `POST /sandbox/clients`: an OAuth client and its secret.
    public struct RegisterClient: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case clientSecret = "client_secret"
        }
        public var clientID: String
        public var clientSecret: String
        public init(clientID: String, clientSecret: String) {
            self.clientID = clientID
            self.clientSecret = clientSecret
        }
    }

    /// ``SandboxAdmin/Mint`` and what a Google sign-in also decides: offline access and the
    /// `openid` scope, as two more keys of the same JSON object.
    public struct Mint: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case offline
            case openID = "openid"
        }
        /// What a sign-in at every sandbox names (the Google user id as its subject).
        public var grant: SandboxAdmin.Mint
        /// Codes only: whether the user granted offline access (a refresh token); true when absent.
        public var offline: Bool?
        /// Whether the grant has the `openid` scope (identity tokens); true when absent.
        public var openID: Bool?
        public init(
            clientID: String,
            subject: String,
            redirectURI: String? = nil,
            lifetimeSeconds: Double? = nil,
            offline: Bool? = nil,
            openID: Bool? = nil
        ) {
            self.grant = SandboxAdmin.Mint(clientID: clientID, subject: subject, redirectURI: redirectURI, lifetimeSeconds: lifetimeSeconds)
            self.offline = offline
            self.openID = openID
        }

        public init(from decoder: any Decoder) throws {
            grant = try SandboxAdmin.Mint(from: decoder)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            offline = try container.decodeIfPresent(Bool.self, forKey: .offline)
            openID = try container.decodeIfPresent(Bool.self, forKey: .openID)
        }

        public func encode(to encoder: any Encoder) throws {
            try grant.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(offline, forKey: .offline)
            try container.encodeIfPresent(openID, forKey: .openID)
        }
    }

    /// How a hand-made token is signed.
    public typealias Signature = SandboxJWTSignature

    /// `POST /sandbox/id-tokens`: an identity token as Google issues it, or bent in one way.
    public struct IdentityTokenRequest: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case subject, audience, issuer, email, signature
            case authorizedParty = "azp"
            case expiresIn = "expires_in"
            case issuedIn = "issued_in"
            case emailVerified = "email_verified"
            case emailVerifiedAsString = "email_verified_as_string"
            case hostedDomain = "hd"
        }
        public var subject: String
        /// One client ID, or several.
        public var audience: [String]
        public var authorizedParty: String?
        /// `https://accounts.google.com` when absent.
        public var issuer: String?
        /// Seconds from now to `exp`; negative for an expired token. An hour when absent.
        public var expiresIn: Double?
        /// Seconds from now to `iat`; positive for a token issued in the future. Now when absent.
        public var issuedIn: Double?
        public var email: String?
        public var emailVerified: Bool?
        /// Sends `email_verified` as the string "true"/"false", as some Google libraries do.
        public var emailVerifiedAsString: Bool?
        public var hostedDomain: String?
        public var signature: Signature?

        public init(
            subject: String,
            audience: [String],
            authorizedParty: String? = nil,
            issuer: String? = nil,
            expiresIn: Double? = nil,
            issuedIn: Double? = nil,
            email: String? = nil,
            emailVerified: Bool? = nil,
            emailVerifiedAsString: Bool? = nil,
            hostedDomain: String? = nil,
            signature: Signature? = nil
        ) {
            self.subject = subject
            self.audience = audience
            self.authorizedParty = authorizedParty
            self.issuer = issuer
            self.expiresIn = expiresIn
            self.issuedIn = issuedIn
            self.email = email
            self.emailVerified = emailVerified
            self.emailVerifiedAsString = emailVerifiedAsString
            self.hostedDomain = hostedDomain
            self.signature = signature
        }
    }

    /// Registers an OAuth client and its secret.
    public func register(clientID: String, clientSecret: String) async throws {
        _ = try await transport.send(.POST, "/sandbox/clients", body: RegisterClient(clientID: clientID, clientSecret: clientSecret))
    }

    /// A user signs in: Google issues a code for the client (a refresh token comes with offline access).
    public func mintCode(_ mint: Mint) async throws -> SandboxAdmin.Minted {
        try await transport.decode(transport.send(.POST, "/sandbox/codes", body: mint))
    }

    /// A grant whose refresh token the app already holds, with or without the `openid` scope.
    public func mintRefreshToken(clientID: String, subject: String, openID: Bool?) async throws -> SandboxAdmin.Minted {
        try await transport.decode(transport.send(.POST, "/sandbox/refresh-tokens", body: Mint(clientID: clientID, subject: subject, openID: openID)))
    }

    /// An identity token signed as asked.
    public func mintIdentityToken(_ request: IdentityTokenRequest) async throws -> String {
        try await transport.decode(transport.send(.POST, "/sandbox/id-tokens", body: request), as: SandboxAdmin.Value.self).value
    }
}

/// The admin routes.
extension GoogleSandbox {
    func addAdminRoutes(to admin: RouterGroup<SandboxRequestContext>) {
        admin.post("clients") { request, context in
            let body = try await request.decode(as: GoogleSandboxAdmin.RegisterClient.self, context: context)
            try await self.register(clientID: body.clientID, clientSecret: body.clientSecret)
            return SandboxJSON.response(["client_id": body.clientID], status: .created)
        }
        admin.post("codes") { request, context in try await self.mint(request, context: context, kind: nil) }
        admin.post("refresh-tokens") { request, context in try await self.mint(request, context: context, kind: .refresh) }
        admin.post("access-tokens") { request, context in try await self.mint(request, context: context, kind: .access) }
        admin.post("id-tokens") { request, context in
            let body = try await request.decode(as: GoogleSandboxAdmin.IdentityTokenRequest.self, context: context)
            return SandboxJSON.response(SandboxAdmin.Value(value: try await self.identityToken(body, now: self.clock.now)), status: .created)
        }
        admin.post("keys/rotate") { request, context in
            let body = try await request.decode(as: SandboxAdmin.RotateKeys.self, context: context)
            return SandboxJSON.response(SandboxAdmin.Value(value: try await self.keys.rotate(retire: body.retire ?? false)))
        }
        admin.addSharedAdminRoutes(state: state, clock: clock)
    }

    /// Registers an OAuth client without going through HTTP (used at start-up).
    public func register(clientID: String, clientSecret: String) async throws {
        guard GoogleApp.isClientID(clientID) else {
            throw HTTPError(.badRequest, message: "client_id is not a Google OAuth client ID (…apps.googleusercontent.com)")
        }
        guard (try? GoogleClientSecret(clientSecret)) != nil else { throw HTTPError(.badRequest, message: "client_secret is not usable") }
        await state.register(clientID: clientID, secret: clientSecret)
    }

    private func mint(_ request: Request, context: SandboxRequestContext, kind: GoogleSandboxState.TokenKind?) async throws -> Response {
        let body = try await request.decode(as: GoogleSandboxAdmin.Mint.self, context: context)
        let (grant, now) = (body.grant, clock.now)
        let minted: SandboxAdmin.Minted
        if let kind {
            minted = await state.mintToken(kind, clientID: grant.clientID, subject: grant.subject, openID: body.openID ?? true)
        } else {
            minted = await state.mintCode(
                clientID: grant.clientID,
                subject: grant.subject,
                redirectURI: grant.redirectURI,
                lifetime: grant.lifetimeSeconds ?? TimeInterval(configuration.codeLifetime.components.seconds),
                offline: body.offline ?? true,
                openID: body.openID ?? true,
                now: now
            )
        }
        if body.openID ?? true { try await signIdentityToken(grantID: minted.grantID, clientID: grant.clientID, subject: grant.subject, now: now) }
        return SandboxJSON.response(minted, status: .created)
    }

    func identityToken(_ body: GoogleSandboxAdmin.IdentityTokenRequest, now: Date) async throws -> String {
        let issuedAt = Int64(now.timeIntervalSince1970 + (body.issuedIn ?? 0))
        var claims: [String: Any] = [
            "iss": body.issuer ?? "https://accounts.google.com",
            "sub": body.subject,
            "aud": body.audience.count == 1 ? body.audience[0] as Any : body.audience as Any,
            "iat": issuedAt,
            "exp": Int64(now.timeIntervalSince1970 + (body.expiresIn ?? 3600)),
        ]
        if let azp = body.authorizedParty { claims["azp"] = azp }
        if let email = body.email { claims["email"] = email }
        if let verified = body.emailVerified {
            claims["email_verified"] = body.emailVerifiedAsString == true ? (verified ? "true" : "false") as Any : verified as Any
        }
        if let hd = body.hostedDomain { claims["hd"] = hd }
        return try await keys.sign(claims: claims, header: ["typ": "JWT"], (body.signature ?? .genuine).signing)
    }
}
