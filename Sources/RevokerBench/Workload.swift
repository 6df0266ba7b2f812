import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import Hummingbird
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore

/// One user's grant as the app holds it: what the benchmark enqueues. The secret stays in memory.
struct Grant: Sendable {
    var provider = ProviderName.apple
    var clientID: String
    var reference: String
    var kind: CredentialKind
    var secret: String
    var grantID: String

    /// The realistic mix: 60% of requests for the first app, 40% for the second; one in five an
    /// authorization code (a user deleting the account right after signing in), the rest refresh tokens.
    static func planned(_ index: Int, apps: [String], prefix: String) -> (clientID: String, reference: String, kind: CredentialKind) {
        let clientID = index % 5 < 3 ? apps[0] : apps[1 % apps.count]
        let kind: CredentialKind = index % 5 == 4 ? .authorizationCode : .refreshToken
        return (clientID, "\(prefix)\(index)", kind)
    }

    /// Signs `count` users in at the sandbox: each gets a live code or refresh token. With a
    /// `googleApp`, every other user signed in with Google instead; with a `facebookApp` too, a
    /// third each with Apple, Google and Facebook (a person's access token, their login ended).
    static func mint(
        _ count: Int,
        apps: [String],
        googleApp: String? = nil,
        facebookApp: String? = nil,
        prefix: String,
        sandbox: RunningSandbox,
        width: Int = 16
    ) async throws -> [Grant] {
        try await concurrently(count, width: width) { index in
            let (clientID, reference, kind) = planned(index, apps: apps, prefix: prefix)
            let subject = "bench-\(reference)"
            if let facebookApp, index % 3 == 2 {
                let facebook = LocalProvider.facebook.name
                let minted = try await sandbox.admin(for: facebook).mintAccessToken(clientID: facebookApp, subject: "\(1_000_000 + index)")
                return Grant(
                    provider: facebook,
                    clientID: facebookApp,
                    reference: reference,
                    kind: .accessToken,
                    secret: minted.value,
                    grantID: minted.grantID
                )
            }
            if let googleApp, index % (facebookApp == nil ? 2 : 3) == 1 {
                let minted =
                    kind == .authorizationCode
                    ? try await sandbox.google.mintCode(.init(clientID: googleApp, subject: subject))
                    : try await sandbox.google.mintRefreshToken(clientID: googleApp, subject: subject)
                return Grant(provider: .google, clientID: googleApp, reference: reference, kind: kind, secret: minted.value, grantID: minted.grantID)
            }
            let minted =
                kind == .authorizationCode
                ? try await sandbox.admin.mintCode(clientID: clientID, subject: subject)
                : try await sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
            return Grant(clientID: clientID, reference: reference, kind: kind, secret: minted.value, grantID: minted.grantID)
        }
    }

    /// Made-up credentials for the enqueue-only measurements (never sent to the sandbox).
    static func unchecked(_ count: Int, apps: [String], prefix: String) -> [Grant] {
        (0..<count).map { index in
            let (clientID, reference, kind) = planned(index, apps: apps, prefix: prefix)
            let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
            return Grant(clientID: clientID, reference: reference, kind: kind, secret: secret, grantID: "")
        }
    }

    func newRevocation() throws -> NewRevocation {
        try NewRevocation(
            provider: provider.rawValue,
            clientID: clientID,
            externalReference: reference,
            credential: Credential(kind: kind, secret: secret)
        )
    }
}

/// The three ways an app enqueues, each timed over a list of grants.
enum EnqueuePath: String, CaseIterable, Sendable {
    case swift, sql, http

    /// Enqueues every grant through this path with `width` concurrent callers and returns the rate.
    func enqueue(
        _ grants: [Grant],
        width: Int,
        client: PostgresClient,
        configuration: RevokerConfiguration,
        logger: Logger
    ) async throws -> BenchmarkReport.EnqueueRate {
        let started = ContinuousClock.now
        switch self {
        case .swift:
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            _ = try await concurrently(grants.count, width: width) { index in
                _ = try await queue.enqueue(grants[index].newRevocation(), actor: "bench")
            }
        case .sql:
            _ = try await concurrently(grants.count, width: width) { index in
                let grant = grants[index]
                _ = try await client.query(
                    "SELECT revoker.enqueue_revocation(\(grant.clientID), \(grant.reference), \(grant.kind.rawValue), \(grant.secret))",
                    logger: logger
                ).collect()
            }
        case .http:
            return try await Self.enqueueOverHTTP(grants, width: width, configuration: configuration, logger: logger)
        }
        let elapsed = (ContinuousClock.now - started).timeInterval
        return .init(path: rawValue, requests: grants.count, concurrency: width, seconds: elapsed, perSecond: Double(grants.count) / elapsed)
    }

    /// Serves the HTTP API in this process on a free port and posts every grant to `/v1/revocations`.
    private static func enqueueOverHTTP(
        _ grants: [Grant],
        width: Int,
        configuration: RevokerConfiguration,
        logger: Logger
    ) async throws -> BenchmarkReport.EnqueueRate {
        let apiKey = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
        var configuration = configuration
        configuration.http.port = 0
        configuration.http.apiKeys = [.init(name: "bench", sha256: Array(SHA256.hash(data: Data(apiKey.utf8))), scopes: [.revocationsWrite])]
        let app = try await RevokerApp(configuration: configuration, parts: .api, logger: logger)
        return try await app.withRunning { running in
            let port = running.apiPort ?? 0
            var clientConfiguration = HTTPClient.Configuration()
            clientConfiguration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: width)
            let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: clientConfiguration)
            defer { http.shutdown { _ in } }
            let started = ContinuousClock.now
            _ = try await concurrently(grants.count, width: width) { index in
                let grant = grants[index]
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/revocations")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
                request.headers.add(name: "Content-Type", value: "application/json")
                let body = try JSONSerialization.data(withJSONObject: [
                    "client_id": grant.clientID, "external_reference": grant.reference, grant.kind.rawValue: grant.secret,
                ])
                request.body = .bytes(ByteBuffer(data: body))
                let response = try await http.execute(request, timeout: .seconds(30))
                _ = try await response.body.collect(upTo: 1 << 20)
                guard (200..<300).contains(response.status.code) else {
                    throw BenchmarkFailure("the HTTP API answered \(response.status.code) to an enqueue")
                }
            }
            let elapsed = (ContinuousClock.now - started).timeInterval
            return .init(path: "http", requests: grants.count, concurrency: width, seconds: elapsed, perSecond: Double(grants.count) / elapsed)
        }
    }
}

/// The benchmark could not run (as opposed to measuring an invalid result).
public struct BenchmarkFailure: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
