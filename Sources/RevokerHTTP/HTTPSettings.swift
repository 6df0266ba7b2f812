import Foundation

/// Where and how `revoker serve` answers HTTP, and who may call it.
public struct HTTPSettings: Sendable, Equatable {
    /// The address to listen on; loopback unless configured.
    public var host = "127.0.0.1"
    /// The port to listen on; 0 takes any free one.
    public var port = 8080
    /// Larger request bodies are refused with 413.
    public var maxBodyBytes = 65_536
    /// The bearer keys that may call `/v1`.
    public var apiKeys: [APIKey] = []
    /// How long a client may take to send a request's head, once its first byte arrived.
    public var headerTimeout: Duration = .seconds(10)
    /// How long a client may take to send a request's body, once its head arrived.
    public var bodyTimeout: Duration = .seconds(30)
    /// A connection with no request in progress is closed after this long.
    public var idleTimeout: Duration = .seconds(60)
    /// Connections served at once; further ones wait in the listen backlog.
    public var maxConnections = 512
    /// The limit of every database call made while answering a request; past it the answer
    /// is 503 with `Retry-After`.
    public var databaseTimeout: Duration = .seconds(5)
    /// How long `POST /v1/grants` with a code waits for a worker to exchange it: answered `201`
    /// (or `422`) within it, `202` past it while the exchange goes on.
    public var grantExchangeWait: Duration = .seconds(3)
    /// Where people and providers reach the service, e.g. `https://revoker.example.com`: the
    /// links it gives out (an erasure request's status page) are made with it. Without it, from
    /// the request's `Host`, `https` unless that is a loopback name.
    public var publicURL: URL?
    /// The compliance pages under `/ui/`; nil (the default) serves none.
    public var ui: UISettings?

    public init() {}
}

/// What an API key may do.
public enum APIScope: String, Sendable, Hashable, CaseIterable {
    case revocationsWrite = "revocations:write"
    case revocationsRead = "revocations:read"
    case auditRead = "audit:read"
    /// Register grants for custody (`POST /v1/grants`).
    case grantsWrite = "grants:write"
    /// See held grants, never their tokens (`GET /v1/grants`).
    case grantsRead = "grants:read"
    /// The event feed (`GET /v1/events`).
    case eventsRead = "events:read"
    /// Everything, including re-queueing.
    case admin
}

/// A bearer key of the HTTP API. Only the SHA-256 of the key is configured.
public struct APIKey: Sendable, Equatable {
    /// Names the caller in audit events (the actor).
    public var name: String
    /// SHA-256 of the key.
    public var sha256: [UInt8]
    /// What the key may do.
    public var scopes: Set<APIScope>
    /// The apps the key may act on and read; nil for every app.
    public var clientIDs: Set<String>?

    public init(name: String, sha256: [UInt8], scopes: Set<APIScope>, clientIDs: Set<String>? = nil) {
        self.name = name
        self.sha256 = sha256
        self.scopes = scopes
        self.clientIDs = clientIDs
    }
}

/// The compliance pages (`/ui/`): sign-in with an `audit:read` API key, search, a request's
/// timeline and receipt, CSV export, the queue's status.
public struct UISettings: Sendable, Equatable {
    /// Where browsers reach the pages, e.g. `https://revoker.example.com` behind a TLS proxy.
    /// With `https`, the session cookie is `Secure` (and `__Host-` prefixed) and forms are
    /// accepted from that origin only; without it, from the origin the request names in `Host`.
    public var publicURL: URL?
    /// A session ends this long after sign-in, however active.
    public var sessionLifetime: Duration = .seconds(8 * 3600)
    /// A session ends after this long without a page.
    public var idleTimeout: Duration = .seconds(30 * 60)

    public init() {}

    /// Whether browsers reach the pages over TLS.
    public var isSecure: Bool { publicURL?.scheme == "https" }
}
