import AppleSignIn
import AsyncHTTPClient
import Crypto
import AppleSignInSandbox
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Prometheus
import RevokerHTTP
import RevokerStore
import RevokerTesting
import RevokerWorker
import ServiceLifecycle

/// The API served over real HTTP on a free loopback port, against a test database and the
/// sandbox, optionally with the worker in the same process, as `revoker serve` wires them.
struct APIHarness: Sendable {
    let worker: WorkerHarness
    let baseURL: String
    let keys: Keys

    /// One bearer key per scope, plus `admin`.
    struct Keys: Sendable {
        let writer = Self.make()
        let reader = Self.make()
        let auditor = Self.make()
        let admin = Self.make()

        static func make() -> String { "rvk_test_" + UUID().uuidString }

        static func hash(_ key: String) -> String { SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined() }

        var configuration: [[String: any Sendable]] {
            [
                ["name": "billing", "sha256": Self.hash(writer), "scopes": ["revocations:write"]],
                ["name": "support", "sha256": Self.hash(reader), "scopes": ["revocations:read"]],
                ["name": "compliance", "sha256": Self.hash(auditor), "scopes": ["audit:read"]],
                ["name": "ops", "sha256": Self.hash(admin), "scopes": ["admin"]],
            ]
        }
    }

    static func with<T: Sendable>(
        runWorker: Bool = false,
        worker settings: [String: any Sendable] = ["poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1],
        _ body: (APIHarness) async throws -> T
    ) async throws -> T {
        let keys = Keys()
        let http: [String: any Sendable] = ["port": 0, "max_body_bytes": 4096, "api_keys": keys.configuration]
        return try await WorkerHarness.with(worker: settings, http: http) { harness in
            let registry = PrometheusCollectorRegistry()
            let metrics = RevokerMetrics(factory: PrometheusMetricsFactory(registry: registry))
            let api = RevokerAPI(
                database: harness.database.client, configuration: harness.configuration, registry: registry, metrics: metrics, logger: harness.logger
            )
            let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
            var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
                .init(service: api.application(onServerRunning: { portContinuation.yield($0) }))
            ]
            let httpClient = AppleClient.makeHTTPClient()
            if runWorker {
                let client = AppleClient(httpClient: httpClient, configuration: harness.sandbox.clientConfiguration(), logger: harness.logger)
                let apps = try await AppleApps(configuration: harness.configuration, client: client)
                services.append(
                    .init(service: RevocationWorker(queue: harness.queue, apps: apps, settings: harness.configuration.worker, metrics: metrics, logger: harness.logger))
                )
            }
            let group = ServiceGroup(configuration: .init(services: services, logger: harness.logger))
            let result: Result<T, any Error> = await withTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try? await group.run() }
                defer { portContinuation.finish() }
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else { return .failure(CancellationError()) }
                let result: Result<T, any Error>
                do {
                    result = .success(try await body(APIHarness(worker: harness, baseURL: "http://127.0.0.1:\(port)", keys: keys)))
                } catch {
                    result = .failure(error)
                }
                await group.triggerGracefulShutdown()
                return result
            }
            try? await httpClient.shutdown()
            return try result.get()
        }
    }

    /// An answer of the API.
    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
    }

    /// Sends one request over HTTP.
    func call(
        _ method: HTTPMethod, _ path: String, key: String?, json: [String: Any]? = nil, body: Data? = nil,
        contentType: String? = "application/json", accept: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        if let accept { request.headers.add(name: "Accept", value: accept) }
        let payload = try body ?? json.map { try JSONSerialization.data(withJSONObject: $0) }
        if let payload {
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
            request.body = .bytes(ByteBuffer(bytes: payload))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        let answer = Answer(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
        try worker.expectNoSecrets(in: answer.text)
        return answer
    }

    /// Mints a refresh token in the sandbox, remembered as a secret to search outputs for.
    func mintRefreshToken(clientID: String = "com.example.notes", subject: String) async throws -> (grantID: String, token: String) {
        let minted = try await worker.sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
        worker.secrets.add(minted.value)
        return (minted.grantID, minted.value)
    }

    /// Requests stored in the database.
    func storedCount() async throws -> Int { try await worker.requests().count }
}
