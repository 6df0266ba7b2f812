import JWTKit

/// A provider's published RS256 signing keys (a JWKS), cached by `kid`.
///
/// Anyone can make a receiver verify a token (notifications and security events come without an
/// API key), so the provider is asked for its keys sparingly, whatever arrives:
/// - one fetch at a time: concurrent callers share the fetch under way;
/// - after any fetch, successful or not, none starts again for `minimumRefreshInterval`, and
///   after consecutive failures the pause doubles up to ``maximumRetryInterval``;
/// - keys are kept for the response's `max-age`, but never less than `minimumRefreshInterval`
///   (a `max-age=0` must not make every token a fetch) and never more than
///   ``maximumLifetime`` (a retired key stops being trusted); ``defaultLifetime`` without one.
///
/// Keys are fetched again once their lifetime has passed, and when a token names a key the cache
/// does not hold (keys rotate). While the last fetch failed, tokens whose key is not cached get
/// that failure (the keys are unavailable, not the key unknown) without a new fetch.
public actor RS256KeySet {
    /// Fetches the key set; `maxAge` is how long it may be cached (nil: ``defaultLifetime``).
    public typealias Fetch = @Sendable () async throws -> (keys: JWKS, maxAge: Duration?)

    /// Keys served without a `max-age` are trusted this long.
    public static let defaultLifetime: Duration = .seconds(3600)
    /// A longer `max-age` is shortened to this: a key the provider retires stops being trusted
    /// within a day, whatever a cache header says.
    public static let maximumLifetime: Duration = .seconds(86_400)
    /// The longest pause after consecutive failed fetches (unless `minimumRefreshInterval` is longer).
    public static let maximumRetryInterval: Duration = .seconds(600)

    /// Why a token's signature was not accepted.
    public enum Rejection: Error, Sendable, Equatable {
        /// Not exactly a compact JWS (three canonical base64url parts and nothing else), or its
        /// payload does not decode as the expected claims.
        case malformed
        /// The header has a `crit` parameter: it names extensions the token needs understood,
        /// and this verifier understands none (RFC 7515 §4.1.11).
        case criticalHeader
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
    /// When the cached keys stop being trusted; nil before the first successful fetch.
    private var expiresAt: ContinuousClock.Instant?
    /// No fetch starts before this.
    private var nextAttempt: ContinuousClock.Instant?
    /// What the last fetch threw, while no fetch has succeeded since.
    private var lastFailure: (any Error)?
    private var consecutiveFailures = 0
    private var refreshing: Task<Void, any Error>?
    /// How many fetches were started (failed ones included), for tests and diagnostics.
    public private(set) var fetches = 0

    public init(minimumRefreshInterval: Duration = .seconds(60), fetch: @escaping Fetch) {
        self.fetch = fetch
        self.minimumRefreshInterval = minimumRefreshInterval
    }

    /// Checks that `token` is a compact JWS whose header says RS256 with a `kid` the provider
    /// publishes and no `crit`, and that its signature verifies with that key; returns the `kid`
    /// and the payload. Only the signature is checked here: the caller checks every claim.
    ///
    /// Throws ``Rejection``, or what `fetch` threw when the keys cannot be fetched.
    public func verify<Payload: JWTPayload>(_ token: String, as _: Payload.Type) async throws -> (kid: String, payload: Payload) {
        // jwt-kit accepts padding and non-canonical final characters, which would give one
        // signature many spellings: only the canonical form goes on.
        guard Self.isCanonicalCompactJWS(token) else { throw Rejection.malformed }
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(Array(token.utf8), as: Payload.self).header
        } catch {
            throw Rejection.malformed
        }
        // jwt-kit ignores `crit`; a token that needs an extension understood is refused.
        guard header.fields["crit"] == nil else { throw Rejection.criticalHeader }
        // One algorithm only: `none`, HS256 keyed with the public key and the like never reach a key.
        guard header.alg == "RS256" else { throw Rejection.unsupportedAlgorithm }
        guard let kid = header.kid, !kid.isEmpty else { throw Rejection.missingKeyID }
        try await prepare(for: kid)
        guard knownKeyIDs.contains(kid) else { throw Rejection.unknownKey }
        do {
            return (kid, try await keys.verify(token, as: Payload.self))
        } catch {
            throw Rejection.invalidSignature
        }
    }

    /// The pause before the next fetch after `failures` consecutive failed ones: the interval,
    /// doubled per further failure, at most ``maximumRetryInterval`` (or the interval if longer).
    public static func retryInterval(afterFailures failures: Int, minimumRefreshInterval interval: Duration) -> Duration {
        guard interval > .zero else { return .zero }
        let cap = max(interval, maximumRetryInterval)
        var pause = interval
        for _ in 1..<max(failures, 1) {
            pause *= 2
            if pause >= cap { return cap }
        }
        return min(pause, cap)
    }

    /// Fetches the keys when the cache cannot answer for `kid` and a fetch is allowed.
    private func prepare(for kid: String) async throws {
        let fresh = expiresAt.map { ContinuousClock.now < $0 } ?? false
        if fresh, knownKeyIDs.contains(kid) { return }
        if let refreshing { return try await refreshing.value }
        if let nextAttempt, ContinuousClock.now < nextAttempt {
            // Too soon to ask again: after a failure the keys are unavailable; after a success
            // an unknown kid stays unknown.
            if let lastFailure { throw lastFailure }
            return
        }
        let task = Task { try await self.load() }
        refreshing = task
        try await task.value
    }

    private func load() async throws {
        defer { refreshing = nil }
        fetches += 1
        let jwks: JWKS
        let maxAge: Duration?
        do {
            (jwks, maxAge) = try await fetch()
        } catch {
            consecutiveFailures += 1
            lastFailure = error
            nextAttempt = .now + Self.retryInterval(afterFailures: consecutiveFailures, minimumRefreshInterval: minimumRefreshInterval)
            throw error
        }
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
        let now = ContinuousClock.now
        keys = fresh
        knownKeyIDs = ids
        consecutiveFailures = 0
        lastFailure = nil
        nextAttempt = now + minimumRefreshInterval
        let lifetime = min(max(maxAge ?? Self.defaultLifetime, minimumRefreshInterval), Self.maximumLifetime)
        expiresAt = now + lifetime
    }

    /// Whether `token` is exactly `header.payload.signature`: three parts of unpadded base64url,
    /// each in its one canonical spelling (the unused bits of the last character zero), with
    /// nothing before, between or after them. Only the signature may be empty (`alg: none` is
    /// then refused by its algorithm).
    public static func isCanonicalCompactJWS(_ token: String) -> Bool {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        return parts.allSatisfy(isCanonicalBase64URL)
    }

    static func isCanonicalBase64URL(_ text: some Collection<UInt8>) -> Bool {
        let remainder = text.count % 4
        guard remainder != 1 else { return false }
        var last: UInt8 = 0
        for byte in text {
            guard let value = base64URLValue(byte) else { return false }
            last = value
        }
        switch remainder {
        case 2: return last & 0x0F == 0
        case 3: return last & 0x03 == 0
        default: return true
        }
    }

    static func base64URLValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
