import JWTKit

/// A provider's published RS256 signing keys (a JWKS), cached by `kid`.
///
/// Keys are fetched when first needed, again once the provider's `max-age` has passed, and again
/// when a token names a key the cache does not hold (keys rotate), that last at most once per
/// `minimumRefreshInterval` so that a flood of made-up `kid`s cannot hammer the provider.
/// Concurrent callers share one fetch.
public actor RS256KeySet {
    /// Fetches the key set; `maxAge` is how long it may be cached (nil: until a `kid` is unknown).
    public typealias Fetch = @Sendable () async throws -> (keys: JWKS, maxAge: Duration?)

    /// Why a token's signature was not accepted.
    public enum Rejection: Error, Sendable, Equatable {
        /// Not a compact JWS, or its payload does not decode as the expected claims.
        case malformed
        /// Signed with another algorithm than RS256 (`none` and HS256 among them).
        case unsupportedAlgorithm
        /// The header names no `kid`.
        case missingKeyID
        /// The `kid` is not among the provider's keys, even after a fetch.
        case unknownKey
        /// The signature does not verify with the key the `kid` names.
        case invalidSignature
    }

    private let fetch: Fetch
    private let minimumRefreshInterval: Duration
    private var keys = JWTKeyCollection()
    private var knownKeyIDs: Set<String> = []
    private var lastRefresh: ContinuousClock.Instant?
    private var expiresAt: ContinuousClock.Instant?
    private var refreshing: Task<Void, any Error>?
    /// How many times the key set was fetched, for tests and diagnostics.
    public private(set) var fetches = 0

    public init(minimumRefreshInterval: Duration = .seconds(60), fetch: @escaping Fetch) {
        self.fetch = fetch
        self.minimumRefreshInterval = minimumRefreshInterval
    }

    /// Checks that `token` is a compact JWS whose header says RS256 with a `kid` the provider
    /// publishes, and that its signature verifies with that key; returns the `kid` and the
    /// payload. Only the signature is checked here: the caller checks every claim.
    ///
    /// Throws ``Rejection``, or what `fetch` throws when the keys cannot be fetched.
    public func verify<Payload: JWTPayload>(_ token: String, as _: Payload.Type) async throws -> (kid: String, payload: Payload) {
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(Array(token.utf8), as: Payload.self).header
        } catch {
            throw Rejection.malformed
        }
        // One algorithm only: `none`, HS256 keyed with the public key and the like never reach a key.
        guard header.alg == "RS256" else { throw Rejection.unsupportedAlgorithm }
        guard let kid = header.kid, !kid.isEmpty else { throw Rejection.missingKeyID }
        if let expiresAt, ContinuousClock.now >= expiresAt {
            try await refresh()
        } else if !knownKeyIDs.contains(kid), lastRefresh.map({ ContinuousClock.now - $0 >= minimumRefreshInterval }) ?? true {
            try await refresh()
        }
        guard knownKeyIDs.contains(kid) else { throw Rejection.unknownKey }
        do {
            return (kid, try await keys.verify(token, as: Payload.self))
        } catch {
            throw Rejection.invalidSignature
        }
    }

    /// Fetches the keys, sharing a fetch already under way.
    private func refresh() async throws {
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.load() }
        refreshing = task
        defer { refreshing = nil }
        try await task.value
    }

    private func load() async throws {
        let (jwks, maxAge) = try await fetch()
        let fresh = JWTKeyCollection()
        var ids: Set<String> = []
        for key in jwks.keys {
            guard let kid = key.keyIdentifier?.string, key.keyType == .rsa else { continue }
            do {
                try await fresh.add(jwk: key)
                ids.insert(kid)
            } catch {
                continue
            }
        }
        fetches += 1
        lastRefresh = .now
        keys = fresh
        knownKeyIDs = ids
        expiresAt = maxAge.map { ContinuousClock.now + $0 }
    }
}
