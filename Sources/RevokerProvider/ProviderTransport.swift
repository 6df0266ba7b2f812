import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOSSL
import Tracing

/// One call to a provider's endpoint over a shared, pooled HTTP client: a form body (never the
/// query string), a deadline, a `User-Agent`, a bound on the answer's size. A call that brings
/// no answer throws a transient ``ProviderFailure`` with a safe sentence; the caller classifies answers.
public struct ProviderTransport: Sendable {
    /// An answer as it came.
    public struct Response: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
        public var body: Data

        public init(status: Int, headers: HTTPHeaders, body: Data) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    public let httpClient: HTTPClient
    /// The provider called, as spans name it.
    public let provider: ProviderName
    public let timeout: Duration
    public let userAgent: String
    public let maximumResponseBytes: Int
    let logger: Logger

    public init(httpClient: HTTPClient, provider: ProviderName, timeout: Duration, userAgent: String, maximumResponseBytes: Int, logger: Logger) {
        self.httpClient = httpClient
        self.provider = provider
        self.timeout = timeout
        self.userAgent = userAgent
        self.maximumResponseBytes = maximumResponseBytes
        self.logger = logger
    }

    /// Sends `form` (or nothing, for a GET) to `url`; `endpoint` names it in logs and failures.
    ///
    /// Each call is a client span (`provider call`) with the provider, the endpoint, the status
    /// and the provider's error code: never the URL's query, the form or the answer's body,
    /// which carry codes, tokens and client secrets.
    public func send(_ url: String, endpoint: String, method: HTTPMethod, form: [(String, String)]?) async throws -> Response {
        try await withSpan("provider call", ofKind: .client) { span in
            // Without a tracer (or unsampled) nothing is recorded, and nothing is parsed for it.
            if span.isRecording {
                span.attributes["revoker.provider"] = provider.rawValue
                span.attributes["revoker.provider.endpoint"] = String(endpoint.split(separator: "/").last ?? "")
                span.attributes["http.request.method"] = method.rawValue
            }
            do {
                let response = try await call(url, endpoint: endpoint, method: method, form: form)
                span.attributes["http.response.status_code"] = response.status
                if response.status >= 400, span.isRecording {
                    // The code alone (bounded, from the provider's vocabulary); its description may echo input.
                    span.attributes["revoker.provider.error"] = OAuthErrorBody.parse(response.body, scrubbing: []).code
                    span.setStatus(SpanStatus(code: .error))
                }
                return response
            } catch let failure as ProviderFailure {
                span.setStatus(SpanStatus(code: .error, message: failure.detail))
                throw failure
            }
        }
    }

    private func call(_ url: String, endpoint: String, method: HTTPMethod, form: [(String, String)]?) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "User-Agent", value: userAgent)
        request.headers.add(name: "Accept", value: "application/json")
        if let form {
            request.headers.add(name: "Content-Type", value: FormEncoding.contentType)
            request.body = .bytes(ByteBuffer(bytes: FormEncoding.encodedBytes(form)))
        }
        let started = ContinuousClock.now
        do {
            let response = try await httpClient.execute(request, deadline: .now() + TimeAmount(timeout), logger: logger)
            let body = try await response.body.collect(upTo: maximumResponseBytes)
            logger.debug(
                "Provider answered",
                metadata: [
                    "provider.endpoint": "\(endpoint)",
                    "http.status": "\(response.status.code)",
                    "provider.latency_ms": "\((ContinuousClock.now - started).milliseconds)",
                ]
            )
            return Response(status: Int(response.status.code), headers: response.headers, body: Data(buffer: body))
        } catch is CancellationError {
            throw CancellationError()
        } catch is NIOTooManyBytesError {
            throw ProviderFailure(
                endpoint: endpoint,
                classification: .transient,
                httpStatus: nil,
                detail: "the answer was larger than \(maximumResponseBytes) bytes"
            )
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw ProviderFailure(endpoint: endpoint, classification: .transient, httpStatus: nil, detail: Self.describe(error))
        }
    }

    /// A safe sentence for a failed call: no URL, no body, nothing that was sent.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout, .getConnectionFromPoolTimeout:
                return "timed out"
            case .remoteConnectionClosed:
                return "the connection was closed before an answer"
            default:
                return "the HTTP call failed (\(SafeText.describing(error, limit: 120)))"
            }
        }
        if let error = error as? IOError { return "the connection failed (errno \(error.errnoCode))" }
        if error is ChannelError { return "the connection was closed before an answer" }
        return "the connection failed (\(String(describing: type(of: error))))"
    }

    /// An HTTP client suited to providers: redirects are not followed (a redirect must never
    /// carry a secret elsewhere), answers are not decompressed, connections are pooled. The
    /// caller shuts it down.
    ///
    /// `concurrency` is how many calls the caller makes at once: HTTP/1 connections per host are
    /// at least that many (and never fewer than 64), or calls queue for a connection (64 at
    /// 200 ms is 320 calls/s). HTTP/2, which Apple and Google negotiate over TLS, multiplexes instead.
    ///
    /// `extraTrustRoots` are trusted beside the system's: for tests against a sandbox serving
    /// HTTPS with a throw-away authority, never for production.
    public static func makeHTTPClient(
        eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
        concurrency: Int = 0,
        extraTrustRoots: [NIOSSLCertificate] = []
    ) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        if !extraTrustRoots.isEmpty {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.certificates(extraTrustRoots)]
            configuration.tlsConfiguration = tls
        }
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(64, concurrency))
        configuration.decompression = .disabled
        // The client's own spans would record the URL and send `traceparent` to the provider:
        // ``send(_:endpoint:method:form:)`` makes the span instead, with what is safe to record.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
    }
}

extension ProviderTransport.Response {
    /// This answer, which was not a success, as a classified failure. `provider` names the
    /// provider in the detail ("Apple", "Google"); `classify` maps the provider's `error` code on
    /// a 4xx answer. A 4xx without an OAuth error body is a proxy's page and transient, like
    /// 429 and 5xx; non-JSON bodies are never echoed.
    public func failure(
        endpoint: String,
        provider: String,
        secrets: [String],
        classify: (String) -> ProviderFailure.Classification
    ) -> ProviderFailure {
        let retryAfter = headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
        let (code, description) = OAuthErrorBody.parse(body, scrubbing: secrets)
        let classification: ProviderFailure.Classification
        let detail: String
        switch status {
        case 429:
            classification = .transient
            detail = "HTTP 429, \(provider) is throttling"
        case 500...599:
            classification = .transient
            detail = "HTTP \(status), \(provider) is unavailable"
        case 400...499 where code != nil:
            classification = code.map(classify) ?? .requestRejected
            detail = "HTTP \(status) \(code ?? "")"
        case 400...499:
            classification = .transient
            detail =
                "HTTP \(status) without \(provider)'s error body (\(body.count) bytes of \(headers.first(name: "Content-Type").map { String($0.prefix(60)) } ?? "no content type")), likely a proxy"
        default:
            classification = .transient
            detail = "unexpected HTTP \(status)"
        }
        return ProviderFailure(
            endpoint: endpoint,
            classification: classification,
            httpStatus: status,
            error: code,
            errorDescription: description,
            retryAfter: retryAfter,
            detail: detail
        )
    }
}

/// An OAuth error body: `{"error": "...", "error_description": "..."}`.
public struct OAuthErrorBody: Decodable, Sendable {
    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
    }
    public var error: String
    public var errorDescription: String?

    /// The bounded code and scrubbed description of an error body, when it is one.
    public static func parse(_ body: Data, scrubbing secrets: [String]) -> (code: String?, description: String?) {
        let answer = try? JSONDecoder().decode(OAuthErrorBody.self, from: body)
        return (answer.flatMap { SafeText.errorCode($0.error) }, answer?.errorDescription.map { SafeText.bounded($0, scrubbing: secrets) })
    }
}
