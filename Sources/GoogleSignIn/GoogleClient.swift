import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import RevokerProvider

/// One of Google's OAuth endpoints, as the audit trail and metrics name it.
public enum GoogleEndpoint: String, Sendable, Hashable, CaseIterable {
    case token = "/token"
    case revoke = "/revoke"
    case certs = "/oauth2/v3/certs"
    case riscConfiguration = "/.well-known/risc-configuration"
}

/// Talks to Google's OAuth 2.0 endpoints over one shared, pooled HTTP client: form bodies,
/// deadlines, a `User-Agent`, and every answer either a typed success or a classified
/// ``ProviderFailure``.
public struct GoogleClient: Sendable {
    /// Where and how to reach Google.
    public struct Configuration: Sendable {
        /// Google's token and revoke endpoints live here.
        public static let googleOAuthBaseURL = "https://oauth2.googleapis.com"
        /// Google's identity-token signing keys.
        public static let googleCertsURL = "https://www.googleapis.com/oauth2/v3/certs"
        /// Cross-Account Protection's discovery document, which names the keys of its tokens.
        public static let googleRISCConfigurationURL = "https://accounts.google.com/.well-known/risc-configuration"

        /// The base of `/token` and `/revoke`, without a trailing slash; the sandbox's in tests.
        public var oauthBaseURL: String
        /// The JWKS of Google's identity-token keys.
        public var certsURL: String
        /// Cross-Account Protection's discovery document (its `jwks_uri` signs security events).
        public var riscConfigurationURL: String
        /// The whole-call deadline, connection to last body byte.
        public var timeout: Duration
        public var userAgent: String
        /// Larger bodies are treated as a proxy's page, not Google's answer.
        public var maximumResponseBytes: Int

        public init(
            oauthBaseURL: String = Self.googleOAuthBaseURL,
            certsURL: String = Self.googleCertsURL,
            riscConfigurationURL: String = Self.googleRISCConfigurationURL,
            timeout: Duration = .seconds(10),
            userAgent: String = "Revoker/1.0 (Google Sign-In account deletion)",
            maximumResponseBytes: Int = 64 * 1024
        ) {
            var base = oauthBaseURL
            while base.hasSuffix("/") { base.removeLast() }
            self.oauthBaseURL = base
            self.certsURL = certsURL
            self.riscConfigurationURL = riscConfigurationURL
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
        logger: Logger = Logger(label: "revoker.google", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.clients = clients
        self.configuration = configuration
        self.logger = logger
    }

    /// Calls over one connection pool.
    public init(
        httpClient: HTTPClient,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "revoker.google", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(clients: ProviderHTTPClients([httpClient]), configuration: configuration, logger: logger)
    }

    /// Google's identity-token keys and how long they may be cached (`Cache-Control: max-age`).
    public func keys() async throws -> (keys: JWKS, maxAge: Duration?) {
        try await keys(at: configuration.certsURL)
    }

    /// The keys that sign Cross-Account Protection's security events: the `jwks_uri` of its
    /// discovery document (the issuer is pinned by the verifier, not read from the document).
    public func riscKeys() async throws -> (keys: JWKS, maxAge: Duration?) {
        struct Discovery: Decodable { var jwks_uri: String }
        let response = try await send(.riscConfiguration, url: configuration.riscConfigurationURL, method: .GET, form: nil)
        guard response.status == 200 else { throw failure(.riscConfiguration, response, secrets: []) }
        guard let discovery = try? JSONDecoder().decode(Discovery.self, from: response.body),
            let url = URL(string: discovery.jwks_uri), ["https", "http"].contains(url.scheme ?? ""), url.host != nil
        else {
            throw ProviderFailure(
                endpoint: GoogleEndpoint.riscConfiguration.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that names no usable jwks_uri"
            )
        }
        return try await keys(at: discovery.jwks_uri)
    }

    private func keys(at url: String) async throws -> (keys: JWKS, maxAge: Duration?) {
        let response = try await send(.certs, url: url, method: .GET, form: nil)
        guard response.status == 200 else { throw failure(.certs, response, secrets: []) }
        guard let jwks = try? JSONDecoder().decode(JWKS.self, from: response.body) else {
            throw ProviderFailure(
                endpoint: GoogleEndpoint.certs.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not a JSON key set"
            )
        }
        return (jwks, response.headers.first(name: "Cache-Control").flatMap(CacheControl.maxAge))
    }

    /// POSTs a form to `/token`: an authorization-code exchange or a refresh.
    public func token(form: [(String, String)], secrets: [String]) async throws -> GoogleTokenResponse {
        let response = try await send(.token, url: configuration.oauthBaseURL + GoogleEndpoint.token.rawValue, method: .POST, form: form)
        guard response.status == 200 else { throw failure(.token, response, secrets: secrets) }
        guard let answer = try? JSONDecoder().decode(GoogleTokenResponse.self, from: response.body) else {
            throw ProviderFailure(
                endpoint: GoogleEndpoint.token.rawValue,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not a token response"
            )
        }
        return answer
    }

    /// Revokes a token (refresh or access: either ends the whole grant). 200 means revoked;
    /// Google's 400 `invalid_token` (already invalid, or unknown) is a `credentialRejected` failure.
    public func revoke(token: String) async throws {
        let url = configuration.oauthBaseURL + GoogleEndpoint.revoke.rawValue
        let response = try await send(.revoke, url: url, method: .POST, form: [("token", token)])
        guard response.status == 200 else { throw failure(.revoke, response, secrets: [token]) }
    }

    private func send(
        _ endpoint: GoogleEndpoint,
        url: String,
        method: HTTPMethod,
        form: [(String, String)]?
    ) async throws -> ProviderTransport.Response {
        let transport = ProviderTransport(
            httpClient: clients.next(),
            provider: .google,
            timeout: configuration.timeout,
            userAgent: configuration.userAgent,
            maximumResponseBytes: configuration.maximumResponseBytes,
            logger: logger
        )
        return try await transport.send(url, endpoint: endpoint.rawValue, method: method, form: form)
    }

    private func failure(_ endpoint: GoogleEndpoint, _ response: ProviderTransport.Response, secrets: [String]) -> ProviderFailure {
        response.failure(endpoint: endpoint.rawValue, provider: "Google", secrets: secrets, classify: Self.classify(googleError:))
    }

    /// The classification of Google's `error` code on a 4xx answer.
    public static func classify(googleError code: String) -> ProviderFailure.Classification {
        switch code {
        // The grant or token is already gone: expired, used, revoked, or not this client's.
        case "invalid_grant", "invalid_token": .credentialRejected
        // Our client's settings: every call of the app fails the same way until someone fixes them.
        case "invalid_client", "deleted_client", "disabled_client", "unsupported_grant_type": .configurationFault
        // `unauthorized_client` also answers a refresh token of another client: that request
        // fails, the app does not pause.
        default: .requestRejected
        }
    }

}

/// A successful answer from `/token`. Holds live tokens: its descriptions show which fields
/// are present, never their values.
public struct GoogleTokenResponse: Sendable, Decodable, CustomStringConvertible, CustomDebugStringConvertible {
    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case scope
    }

    public let accessToken: String
    public let expiresIn: Int?
    /// Present when a code of an offline-access grant was exchanged.
    public let refreshToken: String?
    /// Present when the grant includes the `openid` scope.
    public let idToken: String?
    public let scope: String?

    public var description: String {
        "GoogleTokenResponse(access_token: redacted, refresh_token: \(refreshToken == nil ? "absent" : "redacted"), id_token: \(idToken == nil ? "absent" : "present"))"
    }

    public var debugDescription: String { description }
}
