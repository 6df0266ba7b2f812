import Crypto
import FacebookLogin
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOFoundationCompat
import ProviderSandbox

/// A local stand-in for the parts of Facebook that Facebook Login's server side meets, strict
/// where Facebook is strict.
///
/// The Graph API (`/{version}/debug_token`, `DELETE /{version}/{user-id}/permissions`) takes the
/// app access token `app_id|app_secret` and, for an app that requires it, a matching
/// `appsecret_proof`; it answers Graph's error objects. Limited Login's keys are published at
/// `/.well-known/oauth/openid/jwks/` with a `Cache-Control: max-age`. `/sandbox/*` is the admin
/// surface: register apps, sign people in (classic or Limited Login), make genuine and forged
/// `signed_request`s and Limited Login tokens, rotate keys, inject faults, and read back what
/// happened to each grant. It has no authentication: bind it to loopback.
public struct FacebookSandbox: PrefixedSandbox {
    /// Where the routes start when the sandbox is served beside the others.
    public static let serverName = "FacebookLoginSandbox"
    public static let prefix = "/facebook"

    public struct Configuration: Sendable {
        /// How long a user access token lives (Facebook's long-lived tokens: about 60 days).
        public var accessTokenLifetime: Duration
        /// How long a Limited Login token is valid.
        public var limitedLoginTokenLifetime: Duration
        /// The `max-age` the keys are served with.
        public var keysMaxAge: Duration
        /// Faults injected from the start into the Graph API.
        public var faults: SandboxFaults

        public init(
            accessTokenLifetime: Duration = .seconds(60 * 86_400),
            limitedLoginTokenLifetime: Duration = .seconds(3600),
            keysMaxAge: Duration = .seconds(3600),
            faults: SandboxFaults = .none
        ) {
            self.accessTokenLifetime = accessTokenLifetime
            self.limitedLoginTokenLifetime = limitedLoginTokenLifetime
            self.keysMaxAge = keysMaxAge
            self.faults = faults
        }
    }

    public let configuration: Configuration
    let state: FacebookSandboxState
    let keys: SandboxSigningKeys
    /// What every expiry and every signed time is judged by; tests move it forward.
    let clock = SandboxClock()

    public init(configuration: Configuration = .init()) async throws {
        self.configuration = configuration
        self.state = FacebookSandboxState(faults: configuration.faults)
        self.keys = try await SandboxSigningKeys()
    }

    /// Adds the sandbox's routes under `prefix`.
    public func addRoutes(to router: Router<SandboxRequestContext>, prefix: String) {
        let group = router.group(RouterPath(prefix))
        group.get(":version/debug_token") { request, context in try await self.debugToken(request, context: context) }
        group.delete(":version/:user/permissions") { request, context in try await self.removeLogin(request, context: context) }
        group.post("platform/uninstall") { request, context in try await self.uninstall(request, context: context) }
        group.get(".well-known/oauth/openid/jwks") { _, context in
            let now = self.clock.now
            if let answer = try await self.state.keyFaults.inject(
                context: context,
                record: { status, error in
                    await self.state.record(
                        endpoint: FacebookEndpoint.limitedLoginKeys.rawValue,
                        status: status,
                        error: error,
                        grantID: nil,
                        now: now
                    )
                }
            ) {
                return answer
            }
            await self.state.record(endpoint: FacebookEndpoint.limitedLoginKeys.rawValue, status: 200, error: nil, grantID: nil, now: now)
            return Response(
                status: .ok,
                headers: [
                    .contentType: "application/json; charset=UTF-8",
                    .cacheControl: "public, max-age=\(self.configuration.keysMaxAge.components.seconds)",
                ],
                body: .init(byteBuffer: ByteBuffer(data: await self.keys.jwksJSON))
            )
        }
        addAdminRoutes(to: group.group("sandbox"))
    }

    // MARK: The Graph API

    func debugToken(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = FacebookEndpoint.debugToken.rawValue
        let now = clock.now
        let query = request.uri.queryParameters
        let grantID = await state.grantID(of: query["input_token"].map(String.init))
        do {
            try await inject(endpoint: endpoint, grantID: grantID, now: now, context: context)
            let appID = try await authenticate(query, endpoint: endpoint, grantID: grantID, now: now)
            guard let input = query["input_token"].map(String.init), !input.isEmpty else {
                throw await graphError(endpoint, grantID, now, code: 100, "The parameter input_token is required", type: "GraphMethodException")
            }
            if let app = await state.apps[appID], input == appID + "|" + app.secret {
                // The app's own token, as a probe asks about it.
                await state.record(endpoint: endpoint, status: 200, error: nil, grantID: nil, now: now)
                return SandboxJSON.response(DebugAnswer(data: .init(appID: appID, type: "APP", application: "Sandbox app \(appID)", isValid: true)))
            }
            guard let grant = await state.token(input), let grantID else {
                await state.record(endpoint: endpoint, status: 200, error: nil, grantID: nil, now: now)
                return SandboxJSON.response(DebugAnswer(data: .init(error: .init(code: 190, message: "Invalid OAuth access token."))))
            }
            guard grant.report.clientID == appID else {
                throw await graphError(endpoint, grantID, now, code: 100, "The App_id in the input_token did not match the Viewing App")
            }
            let live = !grant.report.revoked && grant.expiresAt > now
            await state.countValidation(grantID, live: live)
            await state.record(endpoint: endpoint, status: 200, error: nil, grantID: grantID, now: now)
            var data = DebugAnswer.Data(
                appID: appID,
                type: "USER",
                application: "Sandbox app \(appID)",
                expiresAt: Int64(grant.expiresAt.timeIntervalSince1970),
                isValid: live,
                issuedAt: Int64(grant.issuedAt.timeIntervalSince1970),
                scopes: live ? ["email", "public_profile"] : [],
                userID: grant.report.subject
            )
            if !live {
                data.error =
                    grant.report.revoked
                    ? .init(code: 190, message: "Error validating access token: The user has not authorized application \(appID).", subcode: 458)
                    : .init(code: 190, message: "Error validating access token: Session has expired.", subcode: 463)
            }
            return SandboxJSON.response(DebugAnswer(data: data))
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    func removeLogin(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = FacebookEndpoint.permissions.rawValue
        let now = clock.now
        let query = request.uri.queryParameters
        do {
            try await inject(endpoint: endpoint, grantID: nil, now: now, context: context)
            let appID = try await authenticate(query, endpoint: endpoint, grantID: nil, now: now)
            guard let userID = context.parameters.get("user"), FacebookApp.isAppID(userID) else {
                throw await graphError(endpoint, nil, now, code: 100, "Unsupported delete request.", type: "GraphMethodException")
            }
            let touched = await state.removeLogin(appID: appID, userID: userID)
            await state.record(endpoint: endpoint, status: 200, error: nil, grantID: nil, now: now)
            for id in touched { await state.record(endpoint: endpoint, status: 200, error: nil, grantID: id, now: now) }
            return SandboxJSON.response(["success": true])
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    /// Limited Login's uninstall: `id_token` and `app_id` in a form. Meta documents no answer or
    /// error; the sandbox answers `{"success": true}`, takes a token it issued to that app even once
    /// expired (a grant is ended long after its sign-in), and refuses others in Graph's shape.
    func uninstall(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let endpoint = FacebookEndpoint.uninstall.rawValue
        let now = clock.now
        let form: [String: String]
        switch try await SandboxForm.fields(of: request, secretParameters: ["id_token"]) {
        case .success(let fields): form = fields
        case .failure(let problem):
            return await graphError(endpoint, nil, now, code: 100, problem.reason, type: "GraphMethodException").response
        }
        let token = form["id_token"] ?? ""
        let grantID = await state.identityGrant(token)?.report.id
        do {
            try await inject(endpoint: endpoint, grantID: grantID, now: now, context: context)
            guard let grant = await state.identityGrant(token) else {
                throw await graphError(endpoint, nil, now, code: 190, "Invalid id_token")
            }
            guard let appID = form["app_id"], appID == grant.report.clientID else {
                throw await graphError(endpoint, grantID, now, code: 100, "The app_id does not match the id_token", type: "GraphMethodException")
            }
            _ = await state.uninstall(token)
            await state.record(endpoint: endpoint, status: 200, error: nil, grantID: grantID, now: now)
            return SandboxJSON.response(["success": true])
        } catch let answer as SandboxAnswer {
            return answer.response
        }
    }

    /// The app whose access token `app_id|app_secret` the call carries, with the `appsecret_proof`
    /// the app requires; a refusal in Graph's shape otherwise.
    private func authenticate(_ query: Parameters, endpoint: String, grantID: String?, now: Date) async throws -> String {
        guard let token = query["access_token"].map(String.init), !token.isEmpty else {
            throw await graphError(endpoint, grantID, now, code: 104, "An access token is required to request this resource.")
        }
        let parts = token.split(separator: "|", maxSplits: 1)
        guard parts.count == 2, let app = await state.apps[String(parts[0])], app.secret == String(parts[1]) else {
            throw await graphError(endpoint, grantID, now, code: 190, "Invalid OAuth access token - Cannot parse access token")
        }
        let proof = query["appsecret_proof"].map(String.init)
        if app.requiresProof, proof == nil {
            throw await graphError(endpoint, grantID, now, code: 100, "API calls from the server require an appsecret_proof argument")
        }
        if let proof {
            let key = SymmetricKey(data: Array(app.secret.utf8))
            let expected = HMAC<SHA256>.authenticationCode(for: Array(token.utf8), using: key).map { String(format: "%02x", $0) }.joined()
            guard proof == expected else {
                throw await graphError(endpoint, grantID, now, code: 100, "Invalid appsecret_proof provided in the API argument")
            }
        }
        return String(parts[0])
    }

    private func inject(endpoint: String, grantID: String?, now: Date, context: SandboxRequestContext) async throws {
        let answer = try await state.faults.inject(context: context) { status, error in
            await state.record(endpoint: endpoint, status: status, error: error, grantID: grantID, now: now)
        }
        if let answer { throw SandboxAnswer(response: answer) }
    }

    /// Records a refusal and returns Graph's error object as the answer to throw.
    private func graphError(
        _ endpoint: String,
        _ grantID: String?,
        _ now: Date,
        code: Int,
        _ message: String,
        type: String = "OAuthException",
        status: HTTPResponse.Status = .badRequest
    ) async -> SandboxAnswer {
        await state.record(endpoint: endpoint, status: Int(status.code), error: "graph_\(code)", grantID: grantID, now: now, rejection: message)
        let body = GraphErrorAnswer(
            error: .init(message: "(#\(code)) \(message)", type: type, code: code, fbtraceID: "Sbx" + SandboxRandom.hex().prefix(8))
        )
        return SandboxAnswer(response: SandboxJSON.response(body, status: status))
    }
}

/// Graph's error object.
struct GraphErrorAnswer: Encodable {
    struct Inner: Encodable {
        enum CodingKeys: String, CodingKey {
            case message, type, code
            case fbtraceID = "fbtrace_id"
        }
        var message: String
        var type: String
        var code: Int
        var fbtraceID: String
    }
    var error: Inner
}

/// `debug_token`'s answer.
struct DebugAnswer: Encodable {
    struct Failure: Encodable {
        enum CodingKeys: String, CodingKey {
            case code, message
            case subcode = "subcode"
        }
        var code: Int
        var message: String
        var subcode: Int?
    }

    struct Data: Encodable {
        enum CodingKeys: String, CodingKey {
            case appID = "app_id"
            case type, application, error, scopes
            case expiresAt = "expires_at"
            case isValid = "is_valid"
            case issuedAt = "issued_at"
            case userID = "user_id"
        }
        var appID: String?
        var type: String?
        var application: String?
        var expiresAt: Int64?
        var isValid: Bool
        var issuedAt: Int64?
        var scopes: [String]
        var userID: String?
        var error: Failure?

        init(error: Failure) {
            self.isValid = false
            self.scopes = []
            self.error = error
        }

        init(
            appID: String,
            type: String,
            application: String,
            expiresAt: Int64? = nil,
            isValid: Bool,
            issuedAt: Int64? = nil,
            scopes: [String] = [],
            userID: String? = nil
        ) {
            self.appID = appID
            self.type = type
            self.application = application
            self.expiresAt = expiresAt
            self.isValid = isValid
            self.issuedAt = issuedAt
            self.scopes = scopes
            self.userID = userID
        }
    }
    var data: Data
}
