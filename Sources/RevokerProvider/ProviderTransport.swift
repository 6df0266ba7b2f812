import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// One call to a provider's endpoint over a shared, pooled HTTP client: a form body (never the
/// query string), a deadline, a `User-Agent`, a bound on the answer's size. A call that brings
/// no answer throws ``TransportFailure`` with a safe sentence; the caller classifies answers.
public struct ProviderTransport: Sendable {
    /// An answer as it came.
    public struct Response: Sendable {
        public var status: Int
        public var headers: HTTPHeaders
        public var body: Data
    }

    /// Why no answer came: timed out, refused, cut, or too large. Safe to log and store.
    public struct TransportFailure: Error, Sendable, CustomStringConvertible {
        public let detail: String
        public var description: String { detail }
    }

    public let httpClient: HTTPClient
    public let timeout: Duration
    public let userAgent: String
    public let maximumResponseBytes: Int
    let logger: Logger

    public init(httpClient: HTTPClient, timeout: Duration, userAgent: String, maximumResponseBytes: Int, logger: Logger) {
        self.httpClient = httpClient
        self.timeout = timeout
        self.userAgent = userAgent
        self.maximumResponseBytes = maximumResponseBytes
        self.logger = logger
    }

    /// Sends `form` (or nothing, for a GET) to `url`; `label` names the endpoint in debug logs.
    public func send(_ url: String, label: String, method: HTTPMethod, form: [(String, String)]?) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "User-Agent", value: userAgent)
        request.headers.add(name: "Accept", value: "application/json")
        if let form {
            request.headers.add(name: "Content-Type", value: FormEncoding.contentType)
            request.body = .bytes(ByteBuffer(string: FormEncoding.encode(form)))
        }
        let started = ContinuousClock.now
        do {
            let response = try await httpClient.execute(request, deadline: .now() + TimeAmount(timeout), logger: logger)
            let body = try await response.body.collect(upTo: maximumResponseBytes)
            logger.debug(
                "Provider answered",
                metadata: [
                    "provider.endpoint": "\(label)",
                    "http.status": "\(response.status.code)",
                    "provider.latency_ms": "\((ContinuousClock.now - started).milliseconds)",
                ]
            )
            return Response(status: Int(response.status.code), headers: response.headers, body: Data(buffer: body))
        } catch is CancellationError {
            throw CancellationError()
        } catch is NIOTooManyBytesError {
            throw TransportFailure(detail: "the answer was larger than \(maximumResponseBytes) bytes")
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw TransportFailure(detail: Self.describe(error))
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
                return "the HTTP call failed (\(String(describing: error).prefix(120)))"
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
    /// 200 ms is 320 calls/s). HTTP/2 multiplexes instead.
    public static func makeHTTPClient(eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup, concurrency: Int = 0) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(64, concurrency))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
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

extension Duration {
    /// Whole milliseconds, for logs and the audit trail.
    public var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
