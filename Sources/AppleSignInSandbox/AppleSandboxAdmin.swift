import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox

/// Drives a running sandbox's admin surface over HTTP: what tests, the demo and the benchmark
/// use. The calls every sandbox answers alike come from ``SandboxAdminClient``.
public struct AppleSandboxAdmin: SandboxAdminClient {
    /// An admin call the sandbox refused.
    public typealias Failure = SandboxAdminFailure

    public let baseURL: String
    public let httpClient: HTTPClient

    public init(baseURL: String, httpClient: HTTPClient = .shared) {
        self.baseURL = baseURL
        self.httpClient = httpClient
    }

    /// Registers an app and the public half of its key.
    public func register(_ app: SandboxAdmin.RegisterApp) async throws {
        _ = try await transport.send(.POST, "/sandbox/apps", body: app)
    }

    /// A user signs in on the web or a device: Apple issues a code for the app.
    public func mintCode(
        clientID: String,
        subject: String,
        redirectURI: String? = nil,
        lifetimeSeconds: Double? = nil
    ) async throws -> SandboxAdmin.Minted {
        let mint = SandboxAdmin.Mint(clientID: clientID, subject: subject, redirectURI: redirectURI, lifetimeSeconds: lifetimeSeconds)
        return try await transport.decode(transport.send(.POST, "/sandbox/codes", body: mint))
    }

    /// An identity token signed with the sandbox's current key.
    public func mintIdentityToken(_ request: SandboxAdmin.IdentityTokenRequest) async throws -> String {
        try await transport.decode(transport.send(.POST, "/sandbox/id-tokens", body: request), as: SandboxAdmin.Value.self).value
    }

    /// Has the sandbox send one of Apple's notifications (or a broken one) to `notification.url`;
    /// returns what the receiver answered.
    public func sendNotification(_ notification: SandboxAdmin.Notification) async throws -> SandboxAdmin.NotificationDelivery {
        try await transport.decode(transport.send(.POST, "/sandbox/notifications", body: notification))
    }

    /// Sends a notification sent before again, byte for byte.
    public func replayNotification(jti: String, url: String? = nil) async throws -> SandboxAdmin.NotificationDelivery {
        try await transport.decode(transport.send(.POST, "/sandbox/notifications/replay", body: SandboxAdmin.Replay(jti: jti, url: url)))
    }

    /// The connections calls came on (to both sandboxes), and over which HTTP version.
    public func connections() async throws -> SandboxConnectionReport {
        try await transport.decode(transport.send(.GET, "/sandbox/connections"))
    }
}
