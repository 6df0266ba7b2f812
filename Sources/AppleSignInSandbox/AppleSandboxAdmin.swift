import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox

/// Drives a running sandbox's admin surface over HTTP: what tests, the demo and the benchmark use.
public struct AppleSandboxAdmin: Sendable {
    /// An admin call the sandbox refused.
    public typealias Failure = SandboxAdminFailure

    let transport: SandboxAdminTransport
    public var baseURL: String { transport.baseURL }

    public init(baseURL: String, httpClient: HTTPClient = .shared) {
        self.transport = SandboxAdminTransport(baseURL: baseURL, httpClient: httpClient)
    }

    /// Registers an app and the public half of its key.
    public func register(_ app: SandboxAdmin.RegisterApp) async throws {
        _ = try await send(.POST, "/sandbox/apps", body: app)
    }

    /// A user signs in on the web or a device: Apple issues a code for the app.
    public func mintCode(
        clientID: String,
        subject: String,
        redirectURI: String? = nil,
        lifetimeSeconds: Double? = nil
    ) async throws -> SandboxAdmin.Minted {
        try await decode(
            send(
                .POST,
                "/sandbox/codes",
                body: SandboxAdmin.Mint(clientID: clientID, subject: subject, redirectURI: redirectURI, lifetimeSeconds: lifetimeSeconds)
            )
        )
    }

    /// A grant whose refresh token the app already holds.
    public func mintRefreshToken(clientID: String, subject: String) async throws -> SandboxAdmin.Minted {
        try await decode(send(.POST, "/sandbox/refresh-tokens", body: SandboxAdmin.Mint(clientID: clientID, subject: subject)))
    }

    /// A grant of which the app only holds an access token.
    public func mintAccessToken(clientID: String, subject: String) async throws -> SandboxAdmin.Minted {
        try await decode(send(.POST, "/sandbox/access-tokens", body: SandboxAdmin.Mint(clientID: clientID, subject: subject)))
    }

    /// An identity token signed with the sandbox's current key.
    public func mintIdentityToken(_ request: SandboxAdmin.IdentityTokenRequest) async throws -> String {
        try await decode(send(.POST, "/sandbox/id-tokens", body: request), as: SandboxAdmin.Value.self).value
    }

    /// Has the sandbox send one of Apple's notifications (or a broken one) to `notification.url`;
    /// returns what the receiver answered.
    public func sendNotification(_ notification: SandboxAdmin.Notification) async throws -> SandboxAdmin.NotificationDelivery {
        try await decode(send(.POST, "/sandbox/notifications", body: notification))
    }

    /// Sends a notification sent before again, byte for byte.
    public func replayNotification(jti: String, url: String? = nil) async throws -> SandboxAdmin.NotificationDelivery {
        try await decode(send(.POST, "/sandbox/notifications/replay", body: SandboxAdmin.Replay(jti: jti, url: url)))
    }

    /// Publishes a new signing key and returns its `kid`; with `retire`, the older keys stop
    /// being published.
    public func rotateKeys(retire: Bool = false) async throws -> String {
        try await decode(send(.POST, "/sandbox/keys/rotate", body: SandboxAdmin.RotateKeys(retire: retire)), as: SandboxAdmin.Value.self).value
    }

    /// What happened to one grant.
    public func grant(_ id: String) async throws -> SandboxGrantReport {
        try await decode(send(.GET, "/sandbox/grants/\(id)"))
    }

    /// What happened to every grant, in the order they were created.
    public func grants() async throws -> [SandboxGrantReport] {
        try await decode(send(.GET, "/sandbox/grants"))
    }

    /// Counters over all `/auth/*` calls (`/auth/keys` fetches among them).
    public func statistics() async throws -> SandboxStatistics {
        try await decode(send(.GET, "/sandbox/statistics"))
    }

    /// The connections calls came on (to both sandboxes), and over which HTTP version.
    public func connections() async throws -> SandboxConnectionReport {
        try await decode(send(.GET, "/sandbox/connections"))
    }

    /// Replaces the injected faults.
    public func setFaults(_ faults: SandboxFaults) async throws {
        _ = try await send(.PUT, "/sandbox/faults", body: faults)
    }

    /// Replaces the faults injected into `/auth/keys` (and nothing else).
    public func setKeyFaults(_ faults: SandboxFaults) async throws {
        _ = try await send(.PUT, "/sandbox/key-faults", body: faults)
    }

    /// Moves the sandbox's clock `seconds` forward, so codes, tokens and client secrets age
    /// without waiting; it never goes back.
    public func advanceClock(by seconds: Double) async throws {
        try await transport.advanceClock(by: seconds)
    }

    private func send(_ method: HTTPMethod, _ path: String, body: (some Encodable)? = [String: String]?.none) async throws -> ByteBuffer {
        try await transport.send(method, path, body: body)
    }

    private func decode<T: Decodable>(_ buffer: ByteBuffer, as type: T.Type = T.self) throws -> T {
        try transport.decode(buffer, as: type)
    }
}
