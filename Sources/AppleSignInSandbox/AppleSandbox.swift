import AppleSignIn
import Crypto
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ProviderSandbox
import ServiceLifecycle

/// A local stand-in for appleid.apple.com, strict where Apple is strict.
///
/// `/auth/token`, `/auth/revoke` and `/auth/keys` behave as Apple documents them: client
/// secrets are verified against the registered key, codes are single-use and short-lived,
/// refresh tokens validate until revoked, revoke answers 200 with an empty body whatever the
/// token. `/sandbox/*` is the admin surface: register apps, sign users in, inject faults (into
/// `/auth/keys` apart), and read back what really happened to each grant and each key fetch. It has no authentication: bind it to loopback.
public struct AppleSandbox: Sendable {
    /// How strict and how faulty the sandbox is.
    public struct Configuration: Sendable {
        /// How long a minted code can be exchanged (Apple: five minutes).
        public var codeLifetime: Duration
        /// How long issued identity tokens are valid.
        public var identityTokenLifetime: Duration
        /// How far in the future a client secret's `iat` may be.
        public var clockSkew: Duration
        /// Faults injected from the start.
        public var faults: SandboxFaults
        /// The `max-age` `/auth/keys` is served with; none when nil.
        public var keysMaxAge: Duration?

        public init(
            codeLifetime: Duration = .seconds(300),
            identityTokenLifetime: Duration = .seconds(600),
            clockSkew: Duration = .seconds(60),
            faults: SandboxFaults = .none,
            keysMaxAge: Duration? = nil
        ) {
            self.codeLifetime = codeLifetime
            self.identityTokenLifetime = identityTokenLifetime
            self.clockSkew = clockSkew
            self.faults = faults
            self.keysMaxAge = keysMaxAge
        }
    }

    public let configuration: Configuration
    let state: SandboxState
    let identityTokens: SandboxSigningKeys
    let notifications = SentMessages()
    let connections = SandboxConnections()
    /// What every expiry and every signed time is judged by; tests move it forward.
    let clock = SandboxClock()

    public init(configuration: Configuration = .init()) async throws {
        self.configuration = configuration
        self.state = SandboxState(faults: configuration.faults)
        self.identityTokens = try await SandboxSigningKeys()
    }

    /// An application serving the sandbox, and `others` under their prefixes; `onServerRunning`
    /// receives the bound port (pass port 0 for any free one). With `tls` it serves HTTPS and
    /// negotiates HTTP/2 as Apple does; without, plain HTTP/1.1.
    public func application(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: SandboxTLS? = nil,
        logger: Logger = Logger(label: "revoker.sandbox"),
        beside others: any MountableSandbox...,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        let router = router()
        for other in others { other.addRoutes(to: router) }
        let server: HTTPServerBuilder = try tls.map { try HTTPServerBuilder.http2Upgrade(tlsConfiguration: $0.serverConfiguration) } ?? .http1()
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "AppleSignInSandbox"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger
        )
    }

    /// The routes, for embedding the sandbox in another application.
    public func router() -> Router<SandboxRequestContext> {
        let router = Router(context: SandboxRequestContext.self)
        router.add(middleware: SandboxConnectionMiddleware(connections: connections))
        router.post("auth/token") { request, context in try await self.token(request, context: context) }
        router.post("auth/revoke") { request, context in try await self.revoke(request, context: context) }
        router.get("auth/keys") { _, context in try await self.keys(context: context) }
        let admin = router.group("sandbox")
        admin.post("apps") { request, context in try await self.registerApp(request, context: context) }
        admin.post("codes") { request, context in try await self.mint(request, context: context, kind: nil) }
        admin.post("refresh-tokens") { request, context in try await self.mint(request, context: context, kind: .refresh) }
        admin.post("access-tokens") { request, context in try await self.mint(request, context: context, kind: .access) }
        admin.post("id-tokens") { request, context in try await self.mintIdentityToken(request, context: context) }
        admin.post("notifications") { request, context in try await self.sendNotification(request, context: context) }
        admin.post("notifications/replay") { request, context in try await self.replayNotification(request, context: context) }
        admin.post("keys/rotate") { request, context in
            let body = try await request.decode(as: SandboxAdmin.RotateKeys.self, context: context)
            return Self.json(SandboxAdmin.Value(value: try await self.identityTokens.rotate(retire: body.retire ?? false)))
        }
        admin.addSharedAdminRoutes(state: state, clock: clock)
        admin.get("connections") { _, _ in Self.json(self.connections.report) }
        return router
    }

    // MARK: Apple's endpoints

    private static let secretParameters: Set<String> = ["client_secret", "code", "refresh_token", "token"]

    /// The parsed form; an `invalid_request` answer is thrown when the call is not shaped as Apple requires.
    private func form(of request: Request, endpoint: String, now: Date) async throws -> [String: String] {
        switch try await SandboxForm.fields(of: request, secretParameters: Self.secretParameters) {
        case .success(let fields): return fields
        case .failure(let problem): throw await rejection("invalid_request", endpoint, nil, now, problem.reason)
        }
    }

    func token(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = AppleEndpoint.token.rawValue
        let now = clock.now
        do {
            let fields = try await form(of: request, endpoint: endpoint, now: now)
            let (app, grantID) = try await admit(
                fields,
                endpoint: endpoint,
                credential: fields["code"] ?? fields["refresh_token"],
                now: now,
                context: context
            )
            let answer: SandboxState.Answer
            let identityTokenValidAfter = now.addingTimeInterval(60)
            switch fields["grant_type"] {
            case "authorization_code":
                guard let code = fields["code"] else { throw await rejection("invalid_request", endpoint, grantID, now, "code is missing") }
                answer = await state.exchange(
                    code: code,
                    clientID: app.clientID,
                    redirectURI: fields["redirect_uri"],
                    now: now,
                    identityTokenValidAfter: identityTokenValidAfter
                )
            case "refresh_token":
                guard let token = fields["refresh_token"] else {
                    throw await rejection("invalid_request", endpoint, grantID, now, "refresh_token is missing")
                }
                answer = await state.validate(refreshToken: token, clientID: app.clientID, now: now, identityTokenValidAfter: identityTokenValidAfter)
            default:
                throw await rejection("unsupported_grant_type", endpoint, grantID, now, nil)
            }
            switch answer {
            case .rejected(let error, let description):
                return Self.providerError(error, description: description)
            case .tokens(let tokens):
                let idToken: String
                if let cached = tokens.identityToken {
                    idToken = cached
                } else {
                    idToken = try await signIdentityToken(grantID: tokens.grantID, clientID: app.clientID, subject: tokens.subject, now: now)
                }
                // Token values are [A-Za-z0-9._-] only, so they need no JSON escaping.
                var json = #"{"access_token":"\#(tokens.accessToken)","token_type":"Bearer","expires_in":3600,"id_token":"\#(idToken)""#
                if let refreshToken = tokens.refreshToken { json += #","refresh_token":"\#(refreshToken)""# }
                json += "}"
                return Response(
                    status: .ok,
                    headers: [.contentType: "application/json", .cacheControl: "no-store"],
                    body: .init(byteBuffer: ByteBuffer(string: json))
                )
            }
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    /// `/auth/keys`: the published keys, with ``Configuration/keysMaxAge`` when one is set;
    /// every fetch is counted, as a receiver must not fetch once per token.
    func keys(context: SandboxRequestContext) async throws -> Response {
        let endpoint = AppleEndpoint.keys.rawValue
        let now = clock.now
        let faults = await state.keyFaults
        if let answer = try await injectFault(faults, endpoint: endpoint, grantID: nil, now: now, context: context) { return answer }
        await state.record(endpoint: endpoint, status: 200, error: nil, grantID: nil, now: now)
        var headers: HTTPFields = [.contentType: "application/json"]
        if let maxAge = configuration.keysMaxAge { headers[.cacheControl] = "public, max-age=\(maxAge.components.seconds)" }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(data: await identityTokens.jwksJSON)))
    }

    func revoke(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = AppleEndpoint.revoke.rawValue
        let now = clock.now
        do {
            let fields = try await form(of: request, endpoint: endpoint, now: now)
            let (app, grantID) = try await admit(fields, endpoint: endpoint, credential: fields["token"], now: now, context: context)
            guard let token = fields["token"] else { throw await rejection("invalid_request", endpoint, grantID, now, "token is missing") }
            if let hint = fields["token_type_hint"], hint != "refresh_token", hint != "access_token" {
                throw await rejection("invalid_request", endpoint, grantID, now, "token_type_hint must be refresh_token or access_token")
            }
            await state.revoke(token: token, clientID: app.clientID, now: now)
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer()))
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    /// Records a refusal and returns it as the answer to throw.
    func rejection(_ error: String, _ endpoint: String, _ grantID: String?, _ now: Date, _ reason: String?) async -> SandboxAnswer {
        await state.record(endpoint: endpoint, status: 400, error: error, grantID: grantID, now: now, rejection: reason)
        return SandboxAnswer(response: Self.providerError(error, description: reason))
    }

    /// Signs an identity token for the grant and keeps it for later calls. Apple signs one per
    /// call; the sandbox signs when a grant is minted and reuses it while it has a minute left,
    /// so RSA stays off the hot path of a benchmark.
    @discardableResult
    func signIdentityToken(grantID: String, clientID: String, subject: String, now: Date) async throws -> String {
        let expires = now.addingTimeInterval(TimeInterval(configuration.identityTokenLifetime.components.seconds))
        let token = try await identityTokens.sign(
            AppleIdentityClaims(subject: subject, audience: clientID, issuedAt: now, expires: expires, emailVerified: "true", isPrivateEmail: "true")
        )
        await state.storeIdentityToken(token, expiresAt: expires, for: grantID)
        return token
    }

    static func providerError(_ code: String, description: String? = nil) -> Response {
        SandboxJSON.oauthError(code, description: description)
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        SandboxJSON.response(value, status: status)
    }

}

extension AppleSandbox {
    /// Registers an app without going through HTTP (used at start-up).
    public func register(_ app: SandboxAdmin.RegisterApp) async throws {
        guard let publicKey = try? P256.Signing.PublicKey(pemRepresentation: app.publicKeyPEM) else {
            throw HTTPError(.badRequest, message: "public_key_pem is not a P-256 public key")
        }
        await state.register(.init(clientID: app.clientID, teamID: app.teamID, keyID: app.keyID, publicKey: publicKey))
    }
}
