import AsyncHTTPClient
import Crypto
import Foundation
import JWTKit
import Logging
import NIOHTTP1
import RevokerProvider

/// One of Facebook's endpoints, as the audit trail and metrics name it.
public enum FacebookEndpoint: String, Sendable, Hashable, CaseIterable {
    /// `GET /{version}/debug_token`: whose token it is, for which app, and whether it is live.
    case debugToken = "/debug_token"
    /// `DELETE /{version}/{user-id}/permissions`: the app's login for that person removed.
    case permissions = "/permissions"
    /// Limited Login's JWKS.
    case limitedLoginKeys = "/.well-known/oauth/openid/jwks/"
    /// `POST /platform/uninstall/` with a Limited Login token: the app uninstalled for its person.
    case uninstall = "/platform/uninstall/"
}

/// Talks to Facebook's Graph API and Limited Login's published keys over one shared, pooled HTTP
/// client: deadlines, a `User-Agent`, `appsecret_proof` on every Graph call, and every answer
/// either a typed success or a classified ``ProviderFailure``.
///
/// Graph takes its parameters in the query string, as Meta's own SDKs send them on `GET` and
/// `DELETE`: the URL carries the app access token, so it is never logged or put in a span.
public struct FacebookClient: Sendable {
    /// Where and how to reach Facebook.
    public struct Configuration: Sendable {
        /// The Graph API's host.
        public static let graphBaseURL = "https://graph.facebook.com"
        /// The Graph API version called.
        public static let graphVersion = "v25.0"
        /// Limited Login's signing keys.
        public static let limitedLoginKeysURL = "https://limited.facebook.com/.well-known/oauth/openid/jwks/"
        /// Limited Login's uninstall endpoint.
        public static let limitedLoginUninstallURL = "https://www.limited.facebook.com/platform/uninstall/"

        /// The base of Graph's paths, without a trailing slash; the sandbox's in tests.
        public var graphBaseURL: String
        /// The version path segment, e.g. `v23.0`.
        public var graphVersion: String
        /// The JWKS of Limited Login's tokens.
        public var limitedLoginKeysURL: String
        /// Where a Limited Login grant is ended.
        public var limitedLoginUninstallURL: String
        /// The whole-call deadline, connection to last body byte.
        public var timeout: Duration
        public var userAgent: String
        /// Larger bodies are treated as a proxy's page, not Facebook's answer.
        public var maximumResponseBytes: Int

        public init(
            graphBaseURL: String = Self.graphBaseURL,
            graphVersion: String = Self.graphVersion,
            limitedLoginKeysURL: String = Self.limitedLoginKeysURL,
            limitedLoginUninstallURL: String = Self.limitedLoginUninstallURL,
            timeout: Duration = .seconds(10),
            userAgent: String = "Revoker/1.0 (Facebook Login account deletion)",
            maximumResponseBytes: Int = 64 * 1024
        ) {
            var base = graphBaseURL
            while base.hasSuffix("/") { base.removeLast() }
            self.graphBaseURL = base
            self.graphVersion = graphVersion
            self.limitedLoginKeysURL = limitedLoginKeysURL
            self.limitedLoginUninstallURL = limitedLoginUninstallURL
            self.timeout = timeout
            self.userAgent = userAgent
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    /// The connection pools shared by every app, taken in turn.
    public let clients: ProviderHTTPClients
    public let configuration: Configuration
    let logger: Logger

    public init(
        clients: ProviderHTTPClients,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "revoker.facebook", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.clients = clients
        self.configuration = configuration
        self.logger = logger
    }

    /// What `debug_token` says of a user access token, asked with the app's own token.
    public func debugToken(_ token: String, app: FacebookApp) async throws -> FacebookTokenInfo {
        let endpoint = FacebookEndpoint.debugToken
        let response = try await graph(.GET, endpoint, path: endpoint.rawValue, app: app, parameters: [("input_token", token)])
        guard response.status == 200 else { throw Self.failure(endpoint, response, secrets: [token, app.secret.value]) }
        guard let answer = try? JSONDecoder().decode(FacebookTokenInfo.Envelope.self, from: response.body) else {
            throw ProviderFailure(
                endpoint: endpoint.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not debug_token's answer"
            )
        }
        return answer.data
    }

    /// Removes the app's login for the person `userID` (every permission, and the app from their
    /// settings), with the app's own token: it needs no token of the person's, so it ends a grant
    /// whose token expired, and a Limited Login grant, alike.
    public func removeLogin(userID: String, app: FacebookApp) async throws {
        let endpoint = FacebookEndpoint.permissions
        guard FacebookApp.isAppID(userID) else {
            throw ProviderFailure(
                endpoint: endpoint.rawValue,
                classification: .requestRejected,
                httpStatus: nil,
                detail: "the user id is not an app-scoped user id (digits)"
            )
        }
        let response = try await graph(.DELETE, endpoint, path: "/\(userID)/permissions", app: app, parameters: [])
        guard response.status == 200 else { throw Self.failure(endpoint, response, secrets: [app.secret.value]) }
        // `{"success": true}`, or a bare `true` as Graph answers the removal of one permission.
        struct Success: Decodable { var success: Bool }
        let succeeded =
            (try? JSONDecoder().decode(Success.self, from: response.body))?.success ?? (try? JSONDecoder().decode(Bool.self, from: response.body))
        guard succeeded == true else {
            throw ProviderFailure(
                endpoint: endpoint.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 without {\"success\": true}"
            )
        }
    }

    /// Uninstalls the app for the person of a Limited Login token (`id_token` and `app_id`, as
    /// Meta documents the endpoint). Meta documents neither the answer nor the errors: any 2xx
    /// is taken as done; Graph's throttling and downtime codes are retried, and any other refusal
    /// is final for the request (never the app's configuration: no app credential is sent).
    public func uninstall(identityToken: String, app: FacebookApp) async throws {
        let endpoint = FacebookEndpoint.uninstall
        let transport = transport()
        let response = try await transport.send(
            configuration.limitedLoginUninstallURL,
            endpoint: endpoint.rawValue,
            method: .POST,
            form: [("id_token", identityToken), ("app_id", app.appID)]
        )
        guard !(200...299).contains(response.status) else { return }
        var failure = Self.failure(endpoint, response, secrets: [identityToken])
        if failure.classification == .configurationFault || failure.classification == .credentialRejected {
            failure = ProviderFailure(
                endpoint: failure.endpoint,
                classification: .requestRejected,
                httpStatus: failure.httpStatus,
                error: failure.error,
                errorDescription: failure.errorDescription,
                retryAfter: failure.retryAfter,
                detail: failure.detail + " (the Limited Login token was refused)"
            )
        }
        throw failure
    }

    /// Limited Login's signing keys and how long they may be cached (`Cache-Control: max-age`).
    public func limitedLoginKeys() async throws -> (keys: JWKS, maxAge: Duration?) {
        let endpoint = FacebookEndpoint.limitedLoginKeys
        let response = try await send(configuration.limitedLoginKeysURL, endpoint, method: .GET)
        guard response.status == 200 else { throw Self.failure(endpoint, response, secrets: []) }
        guard let jwks = try? JSONDecoder().decode(JWKS.self, from: response.body) else {
            throw ProviderFailure(
                endpoint: endpoint.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not a JSON key set"
            )
        }
        return (jwks, response.headers.first(name: "Cache-Control").flatMap(CacheControl.maxAge))
    }

    /// `appsecret_proof`: the HMAC-SHA256 of the access token keyed with the app secret, in hex,
    /// which Graph checks when the app requires it (so a stolen token alone is not enough).
    public static func appSecretProof(accessToken: String, secret: FacebookAppSecret) -> String {
        let key = SymmetricKey(data: Array(secret.value.utf8))
        return HMAC<SHA256>.authenticationCode(for: Array(accessToken.utf8), using: key).map { String(format: "%02x", $0) }.joined()
    }

    private func graph(
        _ method: HTTPMethod,
        _ endpoint: FacebookEndpoint,
        path: String,
        app: FacebookApp,
        parameters: [(String, String)]
    ) async throws -> ProviderTransport.Response {
        let token = app.accessToken
        let query = FormEncoding.encode(
            parameters + [("access_token", token), ("appsecret_proof", Self.appSecretProof(accessToken: token, secret: app.secret))]
        )
        let url = configuration.graphBaseURL + "/" + configuration.graphVersion + path + "?" + query
        return try await send(url, endpoint, method: method)
    }

    private func send(_ url: String, _ endpoint: FacebookEndpoint, method: HTTPMethod) async throws -> ProviderTransport.Response {
        try await transport().send(url, endpoint: endpoint.rawValue, method: method, form: nil)
    }

    private func transport() -> ProviderTransport {
        ProviderTransport(
            httpClient: clients.next(),
            provider: .facebook,
            timeout: configuration.timeout,
            userAgent: configuration.userAgent,
            maximumResponseBytes: configuration.maximumResponseBytes,
            logger: logger
        )
    }

    /// An answer that was not a success, as a classified failure: Graph's error object read by
    /// its `code` (``classify(graphCode:subcode:)``), anything else as ``ProviderTransport`` reads it.
    static func failure(_ endpoint: FacebookEndpoint, _ response: ProviderTransport.Response, secrets: [String]) -> ProviderFailure {
        guard let error = GraphError.parse(response.body, scrubbing: secrets), (400...599).contains(response.status) else {
            return response.failure(endpoint: endpoint.rawValue, provider: "Facebook", secrets: secrets) { _ in .transient }
        }
        let classification = classify(graphCode: error.code, subcode: error.subcode)
        return ProviderFailure(
            endpoint: endpoint.rawValue,
            classification: classification,
            httpStatus: response.status,
            error: error.name,
            errorDescription: error.message,
            retryAfter: response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) },
            detail: "HTTP \(response.status) Graph error \(error.code)" + (error.subcode.map { "/\($0)" } ?? "")
        )
    }

    /// How Graph's error `code` is handled.
    public static func classify(graphCode code: Int, subcode: Int?) -> ProviderFailure.Classification {
        switch code {
        // Unknown, temporarily unavailable, and the throttles (app, user, page, account, custom).
        case 1, 2, 4, 17, 32, 341, 368, 613, 80001...80014: .transient
        // The app's own token or secret: every call of the app fails alike until someone fixes it.
        case 190, 102, 10, 200...299: .configurationFault
        // The person is not a user of the app (already removed, or another app's id).
        case 100 where subcode == 33: .credentialRejected
        default: .requestRejected
        }
    }
}

/// Graph's error object: `{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}`.
struct GraphError: Sendable {
    var code: Int
    var subcode: Int?
    /// `graph_<code>`: the bounded word the audit trail and metrics carry.
    var name: String { "graph_\(code)" }
    /// The message, bounded and scrubbed.
    var message: String?

    static func parse(_ body: Data, scrubbing secrets: [String]) -> GraphError? {
        struct Envelope: Decodable {
            struct Inner: Decodable {
                var message: String?
                var code: Int
                var error_subcode: Int?
            }
            var error: Inner
        }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: body) else { return nil }
        let message = envelope.error.message.map { SafeText.bounded($0, scrubbing: secrets) }
        return GraphError(code: envelope.error.code, subcode: envelope.error.error_subcode, message: message)
    }
}

/// What `debug_token` says of a token. Holds no token.
public struct FacebookTokenInfo: Sendable, Decodable, Equatable {
    struct Envelope: Decodable { var data: FacebookTokenInfo }

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case userID = "user_id"
        case type
        case isValid = "is_valid"
        case expiresAt = "expires_at"
        case scopes
        case error
    }

    private struct Failure: Decodable { var subcode: Int? }

    /// The app the token was issued to.
    public var appID: String?
    /// The app-scoped id of the person, for a user token.
    public var userID: String?
    /// `USER`, `APP`, `PAGE`, …
    public var type: String?
    public var isValid: Bool
    /// Seconds since 1970; 0 for a token that does not expire.
    public var expiresAt: Int64?
    public var scopes: [String]?
    /// Why a token is not valid, as `debug_token`'s error names it (458: the person removed the app).
    public var failureSubcode: Int?

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // Ids come as strings, and as numbers in older answers.
        func id(_ key: CodingKeys) throws -> String? {
            if let text = try? container.decodeIfPresent(String.self, forKey: key) { return text }
            return try container.decodeIfPresent(UInt64.self, forKey: key).map(String.init)
        }
        appID = try id(.appID)
        userID = try id(.userID)
        type = try container.decodeIfPresent(String.self, forKey: .type)
        isValid = try container.decode(Bool.self, forKey: .isValid)
        expiresAt = try container.decodeIfPresent(Int64.self, forKey: .expiresAt)
        scopes = try container.decodeIfPresent([String].self, forKey: .scopes)
        failureSubcode = (try? container.decodeIfPresent(Failure.self, forKey: .error))?.subcode
    }

    public init(appID: String?, userID: String?, type: String?, isValid: Bool, expiresAt: Int64? = nil, scopes: [String]? = nil) {
        self.appID = appID
        self.userID = userID
        self.type = type
        self.isValid = isValid
        self.expiresAt = expiresAt
        self.scopes = scopes
    }
}
