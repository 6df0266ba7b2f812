import AsyncHTTPClient
import Foundation
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import RevokerProvider

/// Talks to Apple's Sign in with Apple REST endpoints over one shared, pooled HTTP client.
///
/// Bodies are form-encoded (never the query string), every call has a deadline and a
/// `User-Agent`, and every answer becomes either a typed success or an ``AppleAPIError``
/// with a classification the worker acts on. App-specific calls go through ``AppleAppClient``.
public struct AppleClient: Sendable {
    /// Where and how to reach Apple.
    public struct Configuration: Sendable {
        /// Apple's production base URL.
        public static let appleBaseURL = "https://appleid.apple.com"

        /// The base URL without a trailing slash; the sandbox's address in tests.
        public var baseURL: String
        /// The whole-call deadline, connection to last body byte.
        public var timeout: Duration
        /// Sent on every call, as Apple asks.
        public var userAgent: String
        /// Larger bodies are treated as a proxy's page, not Apple's answer.
        public var maximumResponseBytes: Int

        public init(
            baseURL: String = Self.appleBaseURL,
            timeout: Duration = .seconds(10),
            userAgent: String = "Revoker/1.0 (Sign in with Apple account deletion)",
            maximumResponseBytes: Int = 64 * 1024
        ) {
            var base = baseURL
            while base.hasSuffix("/") { base.removeLast() }
            self.baseURL = base
            self.timeout = timeout
            self.userAgent = userAgent
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    /// The connection pools shared by every app, taken in turn.
    public let clients: ProviderHTTPClients
    /// Where and how to reach Apple.
    public let configuration: Configuration
    let logger: Logger

    public init(
        clients: ProviderHTTPClients,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "revoker.apple", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.clients = clients
        self.configuration = configuration
        self.logger = logger
    }

    /// Calls over one connection pool.
    public init(
        httpClient: HTTPClient,
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "revoker.apple", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.init(clients: ProviderHTTPClients([httpClient]), configuration: configuration, logger: logger)
    }

    /// Apple's current identity-token signing keys from `/auth/keys`, and how long they may be
    /// cached when Apple says (`Cache-Control: max-age`).
    public func keys() async throws -> (keys: JWKS, maxAge: Duration?) {
        let response = try await send(.keys, method: .GET, form: nil, secrets: [])
        guard response.status == 200 else {
            throw Self.failure(.keys, status: response.status, headers: response.headers, body: response.body, secrets: [])
        }
        do {
            let keys = try JSONDecoder().decode(JWKS.self, from: response.body)
            return (keys, response.headers.first(name: "Cache-Control").flatMap(CacheControl.maxAge))
        } catch {
            throw AppleAPIError(
                endpoint: .keys,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not a JSON key set"
            )
        }
    }

    /// POSTs a form and turns the answer into a token response.
    func token(form: [(String, String)], secrets: [String]) async throws -> AppleTokenResponse {
        let response = try await send(.token, method: .POST, form: form, secrets: secrets)
        guard response.status == 200 else {
            throw Self.failure(.token, status: response.status, headers: response.headers, body: response.body, secrets: secrets)
        }
        do {
            return try JSONDecoder().decode(AppleTokenResponse.self, from: response.body)
        } catch {
            throw AppleAPIError(
                endpoint: .token,
                classification: .transient,
                httpStatus: 200,
                detail: "HTTP 200 with a body that is not a token response"
            )
        }
    }

    /// POSTs a revocation form; any 200 means Apple accepted it.
    func revoke(form: [(String, String)], secrets: [String]) async throws {
        let response = try await send(.revoke, method: .POST, form: form, secrets: secrets)
        guard response.status == 200 else {
            throw Self.failure(.revoke, status: response.status, headers: response.headers, body: response.body, secrets: secrets)
        }
    }

    typealias RawResponse = ProviderTransport.Response

    private func send(_ endpoint: AppleEndpoint, method: HTTPMethod, form: [(String, String)]?, secrets: [String]) async throws -> RawResponse {
        let transport = ProviderTransport(
            httpClient: clients.next(),
            provider: .apple,
            timeout: configuration.timeout,
            userAgent: configuration.userAgent,
            maximumResponseBytes: configuration.maximumResponseBytes,
            logger: logger
        )
        return try await transport.send(configuration.baseURL + endpoint.rawValue, endpoint: endpoint.rawValue, method: method, form: form)
    }

    /// Turns a non-200 answer into a classified error. Non-JSON bodies are never echoed.
    static func failure(_ endpoint: AppleEndpoint, status: Int, headers: HTTPHeaders, body: Data, secrets: [String]) -> AppleAPIError {
        RawResponse(status: status, headers: headers, body: body)
            .failure(endpoint: endpoint.rawValue, provider: "Apple", secrets: secrets, classify: AppleAPIError.classify(providerError:))
    }
}
