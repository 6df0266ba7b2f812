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

    public init() {}
}

/// What an API key may do.
public enum APIScope: String, Sendable, Hashable, CaseIterable {
    case revocationsWrite = "revocations:write"
    case revocationsRead = "revocations:read"
    case auditRead = "audit:read"
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

    public init(name: String, sha256: [UInt8], scopes: Set<APIScope>) {
        self.name = name
        self.sha256 = sha256
        self.scopes = scopes
    }
}
