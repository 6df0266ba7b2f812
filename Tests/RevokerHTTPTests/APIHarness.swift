import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import Foundation
import GoogleSignInSandbox
import Logging
import NIOCore
import NIOHTTP1
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting

/// The API served over real HTTP on a free loopback port, against a test database and the
/// sandbox, optionally with the worker in the same process: the assembly `revoker serve` runs.
struct APIHarness: Sendable {
    let stack: RevokerTestStack
    let baseURL: String
    let keys: Keys

    /// One bearer key per scope, plus `admin`.
    struct Keys: Sendable {
        let writer = Self.make()
        let reader = Self.make()
        let auditor = Self.make()
        let admin = Self.make()
        let events = Self.make()
        /// Every scope but admin, for the notes app only.
        let notesOnly = Self.make()

        static func make() -> String { "rvk_test_" + UUID().uuidString }

        static func hash(_ key: String) -> String { SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined() }

        var configuration: [[String: any Sendable]] {
            [
                ["name": "billing", "sha256": Self.hash(writer), "scopes": ["revocations:write"]],
                ["name": "support", "sha256": Self.hash(reader), "scopes": ["revocations:read"]],
                ["name": "compliance", "sha256": Self.hash(auditor), "scopes": ["audit:read"]],
                ["name": "ops", "sha256": Self.hash(admin), "scopes": ["admin"]],
                ["name": "backend-events", "sha256": Self.hash(events), "scopes": ["events:read"]],
                [
                    "name": "notes-backend", "sha256": Self.hash(notesOnly),
                    "scopes": ["revocations:write", "revocations:read", "audit:read", "events:read"],
                    "client_ids": ["com.example.notes"],
                ],
            ]
        }
    }

    static func with<T: Sendable>(
        runWorker: Bool = false,
        worker settings: [String: any Sendable] = ["poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1],
        http overrides: [String: any Sendable] = [:],
        server: String? = nil,
        apps: [ProviderName: [String]] = [:],
        extraKeys: [[String: any Sendable]] = [],
        sandbox: AppleSandbox.Configuration = .init(),
        google: GoogleSandbox.Configuration = .init(),
        _ body: (APIHarness) async throws -> T
    ) async throws -> T {
        let keys = Keys()
        let http = ["port": 0, "max_body_bytes": 4096, "api_keys": keys.configuration + extraKeys].merging(overrides) { $1 }
        return try await RevokerTestStack.with(
            apps: apps,
            worker: settings,
            http: http,
            // Hourly: a test a loaded machine stretches past the default minute would otherwise
            // find a checkpoint's event in the feed among the ones it counts.
            settings: ["audit": ["checkpoint_interval_seconds": 3600] as [String: any Sendable]],
            sandbox: sandbox,
            google: google,
            server: server,
            serving: runWorker ? [.api, .worker] : .api
        ) { stack in
            try await body(APIHarness(stack: stack, baseURL: stack.apiBaseURL ?? "", keys: keys))
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
        _ method: HTTPMethod,
        _ path: String,
        key: String?,
        json: [String: Any]? = nil,
        body: Data? = nil,
        contentType: String? = "application/json",
        accept: String? = nil,
        timeout: TimeAmount = .seconds(30)
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
        let response = try await HTTPClient.shared.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        let answer = Answer(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
        try stack.expectNoSecrets(in: answer.text)
        return answer
    }

    /// Mints a refresh token in the sandbox, remembered as a secret to search outputs for.
    func mintRefreshToken(clientID: String = "com.example.notes", subject: String) async throws -> (grantID: String, token: String) {
        let minted = try await stack.sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
        stack.secrets.add(minted.value)
        return (minted.grantID, minted.value)
    }

    /// Requests stored in the database.
    func storedCount() async throws -> Int { try await stack.requests().count }
}
