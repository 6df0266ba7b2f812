import AsyncHTTPClient
import Crypto
import FacebookLogin
import Foundation
import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox
import RevokerProvider

/// Drives a running Facebook sandbox's admin surface over HTTP: what tests, the demo and the
/// benchmark use. `baseURL` is where the sandbox's routes start (`…/facebook` when it is served
/// beside the others). The calls every sandbox answers alike come from ``SandboxAdminClient``.
public struct FacebookSandboxAdmin: SandboxAdminClient {
    public let baseURL: String
    public let httpClient: HTTPClient

    public init(baseURL: String, httpClient: HTTPClient = .shared) {
        self.baseURL = baseURL
        self.httpClient = httpClient
    }

    /// `POST /sandbox/apps`: an app, its secret, and whether it requires `appsecret_proof`.
    public struct RegisterApp: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case appID = "app_id"
            case appSecret = "app_secret"
            case requiresProof = "requires_proof"
        }
        public var appID: String
        public var appSecret: String
        /// True when absent, as "Require App Secret" is recommended.
        public var requiresProof: Bool?
        public init(appID: String, appSecret: String, requiresProof: Bool? = nil) {
            self.appID = appID
            self.appSecret = appSecret
            self.requiresProof = requiresProof
        }
    }

    /// How a hand-made Limited Login token is signed.
    public typealias Signature = SandboxJWTSignature

    /// `POST /sandbox/limited-login-tokens`: a Limited Login sign-in (a grant without an access
    /// token) and its token, or a token bent in one way (then no grant is made).
    public struct LimitedLoginTokenRequest: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case appID = "app_id"
            case subject, nonce, issuer, audience, signature
            case expiresIn = "expires_in"
            case issuedIn = "issued_in"
        }
        public var appID: String
        /// The app-scoped user id.
        public var subject: String
        public var nonce: String?
        /// `https://www.facebook.com` when absent.
        public var issuer: String?
        /// The app id when absent.
        public var audience: String?
        /// Seconds from now; the sandbox's lifetime when absent.
        public var expiresIn: Double?
        /// Seconds from now (negative: in the past); 0 when absent.
        public var issuedIn: Double?
        public var signature: Signature?

        public init(
            appID: String,
            subject: String,
            nonce: String? = nil,
            issuer: String? = nil,
            audience: String? = nil,
            expiresIn: Double? = nil,
            issuedIn: Double? = nil,
            signature: Signature? = nil
        ) {
            self.appID = appID
            self.subject = subject
            self.nonce = nonce
            self.issuer = issuer
            self.audience = audience
            self.expiresIn = expiresIn
            self.issuedIn = issuedIn
            self.signature = signature
        }
    }

    /// `POST /sandbox/signed-requests`: a `signed_request` as Facebook sends its callbacks, or
    /// one bent in one way.
    public struct SignedRequestRequest: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case appID = "app_id"
            case userID = "user_id"
            case algorithm
            case issuedIn = "issued_in"
            case secret
            case padded
        }
        public var appID: String
        public var userID: String
        /// `HMAC-SHA256` when absent.
        public var algorithm: String?
        /// Seconds from now (negative: in the past); 0 when absent.
        public var issuedIn: Double?
        /// Signed with this secret instead of the app's (a forgery).
        public var secret: String?
        /// With base64 padding (`=`), as some of Facebook's callers send it.
        public var padded: Bool?

        public init(appID: String, userID: String, algorithm: String? = nil, issuedIn: Double? = nil, secret: String? = nil, padded: Bool? = nil) {
            self.appID = appID
            self.userID = userID
            self.algorithm = algorithm
            self.issuedIn = issuedIn
            self.secret = secret
            self.padded = padded
        }
    }

    /// `POST /sandbox/callbacks`: a `signed_request` (``SignedRequestRequest``) posted as a form
    /// to an app's callback URL, as Facebook calls the Deauthorize and Data Deletion Request
    /// callbacks; with `removes_app`, the person's grants at the app end first (they removed it).
    public struct Callback: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case url
            case removesApp = "removes_app"
        }
        public var url: String
        public var signedRequest: SignedRequestRequest
        /// True when absent.
        public var removesApp: Bool?

        public init(url: String, _ signedRequest: SignedRequestRequest, removesApp: Bool? = nil) {
            self.url = url
            self.signedRequest = signedRequest
            self.removesApp = removesApp
        }

        public init(from decoder: any Decoder) throws {
            signedRequest = try SignedRequestRequest(from: decoder)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            url = try container.decode(String.self, forKey: .url)
            removesApp = try container.decodeIfPresent(Bool.self, forKey: .removesApp)
        }

        public func encode(to encoder: any Encoder) throws {
            try signedRequest.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(url, forKey: .url)
            try container.encodeIfPresent(removesApp, forKey: .removesApp)
        }
    }

    /// What the app's callback answered, and what was sent.
    public struct Delivery: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case status, body
            case signedRequest = "signed_request"
        }
        public var status: Int
        /// At most 4 KiB of the answer.
        public var body: String
        public var signedRequest: String
    }

    /// Posts a callback and returns what the app answered.
    public func sendCallback(_ callback: Callback) async throws -> Delivery {
        try await transport.decode(transport.send(.POST, "/sandbox/callbacks", body: callback))
    }

    /// Registers an app.
    public func registerApp(appID: String, appSecret: String, requiresProof: Bool = true) async throws {
        _ = try await transport.send(.POST, "/sandbox/apps", body: RegisterApp(appID: appID, appSecret: appSecret, requiresProof: requiresProof))
    }

    /// A classic Facebook Login: the person's grant and its user access token.
    public func signIn(appID: String, userID: String) async throws -> SandboxAdmin.Minted {
        try await mintAccessToken(clientID: appID, subject: userID)
    }

    /// A Limited Login token: `value` the token, `grant_id` the grant it made (empty for a bent one).
    public func limitedLoginToken(_ request: LimitedLoginTokenRequest) async throws -> SandboxAdmin.Minted {
        try await transport.decode(transport.send(.POST, "/sandbox/limited-login-tokens", body: request))
    }

    /// A `signed_request`.
    public func signedRequest(_ request: SignedRequestRequest) async throws -> String {
        try await transport.decode(transport.send(.POST, "/sandbox/signed-requests", body: request), as: SandboxAdmin.Value.self).value
    }

    /// The person removes the app in their Facebook settings: their grants end without a call.
    public func userRemovesApp(appID: String, userID: String) async throws {
        _ = try await transport.send(.POST, "/sandbox/users/remove-app", body: ["app_id": appID, "user_id": userID])
    }
}

extension FacebookSandbox {
    func addAdminRoutes(to admin: RouterGroup<SandboxRequestContext>) {
        admin.post("apps") { request, context in
            let body = try await request.decode(as: FacebookSandboxAdmin.RegisterApp.self, context: context)
            try await self.register(appID: body.appID, appSecret: body.appSecret, requiresProof: body.requiresProof ?? true)
            return SandboxJSON.response(["app_id": body.appID], status: .created)
        }
        admin.post("access-tokens") { request, context in
            let body = try await request.decode(as: SandboxAdmin.Mint.self, context: context)
            try await self.requireApp(body.clientID, user: body.subject)
            let lifetime = body.lifetimeSeconds ?? self.configuration.accessTokenLifetime.timeInterval
            let minted = await self.state.signIn(
                appID: body.clientID,
                userID: body.subject,
                accessToken: true,
                lifetime: lifetime,
                now: self.clock.now
            )
            return SandboxJSON.response(minted, status: .created)
        }
        admin.post("limited-login-tokens") { request, context in
            let body = try await request.decode(as: FacebookSandboxAdmin.LimitedLoginTokenRequest.self, context: context)
            return SandboxJSON.response(try await self.limitedLoginToken(body), status: .created)
        }
        admin.post("signed-requests") { request, context in
            let body = try await request.decode(as: FacebookSandboxAdmin.SignedRequestRequest.self, context: context)
            return SandboxJSON.response(SandboxAdmin.Value(value: try await self.signedRequest(body)), status: .created)
        }
        admin.post("callbacks") { request, context in
            let body = try await request.decode(as: FacebookSandboxAdmin.Callback.self, context: context)
            let signed = try await self.signedRequest(body.signedRequest)
            if body.removesApp ?? true {
                _ = await self.state.userRemovedApp(appID: body.signedRequest.appID, userID: body.signedRequest.userID)
            }
            let form = FormEncoding.encodedBytes([("signed_request", signed)])
            let (status, answer) = try await SentMessages.push(
                Data(form),
                to: body.url,
                contentType: FormEncoding.contentType,
                userAgent: "facebookexternalua"
            )
            return SandboxJSON.response(FacebookSandboxAdmin.Delivery(status: status, body: answer, signedRequest: signed))
        }
        admin.post("users/remove-app") { request, context in
            let body = try await request.decode(as: [String: String].self, context: context)
            guard let appID = body["app_id"], let userID = body["user_id"] else {
                throw HTTPError(.badRequest, message: "app_id and user_id are required")
            }
            return SandboxJSON.response(["ended": await self.state.userRemovedApp(appID: appID, userID: userID)])
        }
        admin.post("keys/rotate") { request, context in
            let body = try await request.decode(as: SandboxAdmin.RotateKeys.self, context: context)
            return SandboxJSON.response(SandboxAdmin.Value(value: try await self.keys.rotate(retire: body.retire ?? false)))
        }
        admin.addSharedAdminRoutes(state: state, clock: clock)
    }

    /// Registers an app without going through HTTP (used at start-up).
    public func register(appID: String, appSecret: String, requiresProof: Bool = true) async throws {
        guard FacebookApp.isAppID(appID) else { throw HTTPError(.badRequest, message: "app_id is not a Facebook app id (digits)") }
        guard (try? FacebookAppSecret(appSecret)) != nil else { throw HTTPError(.badRequest, message: "app_secret is not usable") }
        await state.register(appID: appID, secret: appSecret, requiresProof: requiresProof)
    }

    private func requireApp(_ appID: String, user: String) async throws {
        guard await state.apps[appID] != nil else { throw HTTPError(.badRequest, message: "no app \(appID.prefix(40)) is registered") }
        guard FacebookApp.isAppID(user) else { throw HTTPError(.badRequest, message: "the user id must be digits, as app-scoped ids are") }
    }

    func limitedLoginToken(_ body: FacebookSandboxAdmin.LimitedLoginTokenRequest) async throws -> SandboxAdmin.Minted {
        try await requireApp(body.appID, user: body.subject)
        let now = clock.now
        let lifetime = body.expiresIn ?? configuration.limitedLoginTokenLifetime.timeInterval
        var claims: [String: Any] = [
            "iss": body.issuer ?? "https://www.facebook.com",
            "sub": body.subject,
            "aud": body.audience ?? body.appID,
            "iat": Int64(now.timeIntervalSince1970 + (body.issuedIn ?? 0)),
            "exp": Int64(now.timeIntervalSince1970 + lifetime),
            "jti": UUID().uuidString.lowercased(),
            "name": "Sandbox User",
        ]
        if let nonce = body.nonce { claims["nonce"] = nonce }
        let signature = body.signature ?? .genuine
        let token = try await keys.sign(claims: claims, signature.signing)
        // Only a genuine sign-in makes a grant; a forgery stands for no one's login.
        let genuine = signature == .genuine && body.issuer == nil && body.audience == nil && body.issuedIn == nil && body.expiresIn == nil
        let grantID =
            genuine ? await state.signIn(appID: body.appID, userID: body.subject, accessToken: false, lifetime: lifetime, now: now).grantID : ""
        if genuine { await state.issued(identityToken: token, grantID: grantID) }
        return SandboxAdmin.Minted(value: token, grantID: grantID)
    }

    func signedRequest(_ body: FacebookSandboxAdmin.SignedRequestRequest) async throws -> String {
        guard let app = await state.apps[body.appID] else { throw HTTPError(.badRequest, message: "no app \(body.appID.prefix(40)) is registered") }
        let payload: [String: Any] = [
            "algorithm": body.algorithm ?? "HMAC-SHA256",
            "issued_at": Int64(clock.now.timeIntervalSince1970 + (body.issuedIn ?? 0)),
            "user_id": body.userID,
        ]
        let encode = { (data: Data) -> String in
            let text = data.base64URLEncoded
            return body.padded == true ? text + String(repeating: "=", count: (4 - text.utf8.count % 4) % 4) : text
        }
        let encodedPayload = encode(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
        let key = SymmetricKey(data: Array((body.secret ?? app.secret).utf8))
        let signature = Data(HMAC<SHA256>.authenticationCode(for: Array(encodedPayload.utf8), using: key))
        return encode(signature) + "." + encodedPayload
    }
}
