import Foundation
import GoogleSignIn
import Hummingbird
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ProviderSandbox

/// A local stand-in for Google's OAuth endpoints, strict where Google is strict.
///
/// `/token` checks the client's id and secret, codes are single-use, short-lived and bound to
/// their redirect URI, refresh tokens refresh until the grant is revoked; `/revoke` answers 200
/// for a live token and 400 `invalid_token` for anything else; `/oauth2/v3/certs` publishes the
/// keys that sign identity tokens with a `Cache-Control: max-age`. `/sandbox/*` is the admin
/// surface: register clients, sign users in, rotate keys, inject faults, send RISC events and
/// read back what happened to each grant. It has no authentication: bind it to loopback.
public struct GoogleSandbox: PrefixedSandbox {
    /// Where the routes start when the sandbox is served beside Apple's.
    public static let serverName = "GoogleSignInSandbox"
    public static let prefix = "/google"

    public struct Configuration: Sendable {
        /// How long a minted code can be exchanged.
        public var codeLifetime: Duration
        /// How long issued identity tokens are valid (Google: an hour).
        public var identityTokenLifetime: Duration
        /// The `max-age` the key set and the RISC discovery document are served with.
        public var certsMaxAge: Duration
        /// Faults injected from the start into `/token` and `/revoke`.
        public var faults: SandboxFaults

        public init(
            codeLifetime: Duration = .seconds(300),
            identityTokenLifetime: Duration = .seconds(3600),
            certsMaxAge: Duration = .seconds(3600),
            faults: SandboxFaults = .none
        ) {
            self.codeLifetime = codeLifetime
            self.identityTokenLifetime = identityTokenLifetime
            self.certsMaxAge = certsMaxAge
            self.faults = faults
        }
    }

    public let configuration: Configuration
    let state: GoogleSandboxState
    let keys: SandboxSigningKeys
    let sent = SentMessages()
    /// What every expiry and every signed time is judged by; tests move it forward.
    let clock = SandboxClock()

    public init(configuration: Configuration = .init()) async throws {
        self.configuration = configuration
        self.state = GoogleSandboxState(faults: configuration.faults)
        self.keys = try await SandboxSigningKeys()
    }

    /// Adds the sandbox's routes under `prefix`.
    public func addRoutes(to router: Router<SandboxRequestContext>, prefix: String) {
        let group = router.group(RouterPath(prefix))
        group.post("token") { request, context in try await self.token(request, context: context) }
        group.post("revoke") { request, context in try await self.revoke(request, context: context) }
        group.get("oauth2/v3/certs") { _, context in
            if let answer = try await self.injectKeyFault(GoogleEndpoint.certs, context: context) { return answer }
            await self.state.record(endpoint: GoogleEndpoint.certs.rawValue, status: 200, error: nil, grantID: nil, now: self.clock.now)
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=UTF-8", .cacheControl: self.cacheControl],
                body: .init(byteBuffer: ByteBuffer(data: await self.keys.jwksJSON))
            )
        }
        let admin = group.group("sandbox")
        addAdminRoutes(to: admin)
        addRISCRoutes(to: group, admin: admin)
    }

    // MARK: Google's endpoints

    private static let secretParameters: Set<String> = ["client_secret", "code", "refresh_token", "token"]

    func token(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = GoogleEndpoint.token.rawValue
        let now = clock.now
        do {
            let fields = try await form(of: request, endpoint: endpoint, now: now)
            let call = await state.lookup(clientID: fields["client_id"], credential: fields["code"] ?? fields["refresh_token"])
            try await inject(call.faults, endpoint: endpoint, grantID: call.grantID, now: now, context: context)
            guard let clientID = fields["client_id"] else {
                throw await refusal(endpoint, call.grantID, now, "invalid_request", "Could not determine client ID from request.")
            }
            guard let secret = call.secret else {
                throw await refusal(endpoint, call.grantID, now, "invalid_client", "The OAuth client was not found.", status: .unauthorized)
            }
            guard fields["client_secret"] == secret else {
                throw await refusal(endpoint, call.grantID, now, "invalid_client", "Unauthorized", status: .unauthorized)
            }
            let validAfter = now.addingTimeInterval(60)
            let answer: GoogleSandboxState.Answer
            switch fields["grant_type"] {
            case "authorization_code":
                guard let code = fields["code"] else {
                    throw await refusal(endpoint, call.grantID, now, "invalid_request", "Missing required parameter: code")
                }
                answer = await state.exchange(
                    code: code,
                    clientID: clientID,
                    redirectURI: fields["redirect_uri"],
                    now: now,
                    identityTokenValidAfter: validAfter
                )
            case "refresh_token":
                guard let token = fields["refresh_token"] else {
                    throw await refusal(endpoint, call.grantID, now, "invalid_request", "Missing required parameter: refresh_token")
                }
                answer = await state.refresh(token: token, clientID: clientID, now: now, identityTokenValidAfter: validAfter)
            default:
                throw await refusal(
                    endpoint,
                    call.grantID,
                    now,
                    "unsupported_grant_type",
                    "Invalid grant_type: \(fields["grant_type"]?.prefix(40) ?? "")"
                )
            }
            switch answer {
            case .refused(let status, let error, let description):
                return SandboxJSON.oauthError(error, description: description, status: .init(code: status))
            case .tokens(let issued):
                var body: [String: any Sendable] = [
                    "access_token": issued.accessToken, "expires_in": 3599, "token_type": "Bearer",
                    "scope": issued.openID
                        ? "openid https://www.googleapis.com/auth/userinfo.email" : "https://www.googleapis.com/auth/userinfo.email",
                ]
                if let refreshToken = issued.refreshToken { body["refresh_token"] = refreshToken }
                if issued.openID {
                    body["id_token"] =
                        if let cached = issued.identityToken {
                            cached
                        } else {
                            try await signIdentityToken(grantID: issued.grantID, clientID: clientID, subject: issued.subject, now: now)
                        }
                }
                let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
                return Response(
                    status: .ok,
                    headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-cache, no-store, max-age=0, must-revalidate"],
                    body: .init(byteBuffer: ByteBuffer(data: data))
                )
            }
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    func revoke(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = GoogleEndpoint.revoke.rawValue
        let now = clock.now
        do {
            let fields = try await form(of: request, endpoint: endpoint, now: now)
            let call = await state.lookup(clientID: nil, credential: fields["token"])
            try await inject(call.faults, endpoint: endpoint, grantID: call.grantID, now: now, context: context)
            guard let token = fields["token"] else {
                throw await refusal(endpoint, nil, now, "invalid_request", "Missing required parameter: token")
            }
            guard await state.revoke(token: token, now: now) else {
                return SandboxJSON.oauthError("invalid_token", description: "Token expired or revoked")
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "{}"))
            )
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    private func form(of request: Request, endpoint: String, now: Date) async throws -> [String: String] {
        switch try await SandboxForm.fields(of: request, secretParameters: Self.secretParameters) {
        case .success(let fields): return fields
        case .failure(let problem): throw await refusal(endpoint, nil, now, "invalid_request", problem.reason)
        }
    }

    /// How the key set and the discovery document may be cached (``Configuration/certsMaxAge``).
    var cacheControl: String {
        "public, max-age=\(configuration.certsMaxAge.components.seconds), must-revalidate, no-transform"
    }

    /// The key faults' answer to one fetch of the keys or the discovery document, recorded; nil
    /// when the fetch is to be answered.
    func injectKeyFault(_ endpoint: GoogleEndpoint, context: SandboxRequestContext) async throws -> Response? {
        let now = clock.now
        return try await state.keyFaults.inject(context: context) { status, error in
            await state.record(endpoint: endpoint.rawValue, status: status, error: error, grantID: nil, now: now)
        }
    }

    private func inject(_ faults: SandboxFaults, endpoint: String, grantID: String?, now: Date, context: SandboxRequestContext) async throws {
        let answer = try await faults.inject(context: context) { status, error in
            await state.record(endpoint: endpoint, status: status, error: error, grantID: grantID, now: now)
        }
        if let answer { throw SandboxAnswer(response: answer) }
    }

    /// Records a refusal and returns it as the answer to throw.
    private func refusal(
        _ endpoint: String,
        _ grantID: String?,
        _ now: Date,
        _ error: String,
        _ description: String,
        status: HTTPResponse.Status = .badRequest
    ) async -> SandboxAnswer {
        await state.record(endpoint: endpoint, status: Int(status.code), error: error, grantID: grantID, now: now, rejection: description)
        return SandboxAnswer(response: SandboxJSON.oauthError(error, description: description, status: status))
    }

    /// Signs an identity token for the grant and keeps it while it has a minute left, so RSA
    /// stays off the hot path of a benchmark (Google signs one per call).
    @discardableResult
    func signIdentityToken(grantID: String, clientID: String, subject: String, now: Date) async throws -> String {
        let expires = now.addingTimeInterval(TimeInterval(configuration.identityTokenLifetime.components.seconds))
        let claims = GoogleIdentityClaims(
            subject: subject,
            audience: clientID,
            authorizedParty: clientID,
            issuedAt: now,
            expires: expires,
            email: "user-\(subject.prefix(12))@example.com",
            emailVerified: true
        )
        let token = try await keys.sign(claims)
        await state.storeIdentityToken(token, expiresAt: expires, for: grantID)
        return token
    }
}
