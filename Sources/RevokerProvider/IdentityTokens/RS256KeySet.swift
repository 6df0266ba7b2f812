import JWTKit

/// A provider's published RS256 signing keys (a JWKS), cached by `kid`.
///
/// Where a token comes from decides what a `kid` the cache lacks may cost (``Origin``):
/// - a token in the provider's answer to Revoker's own call (an identity token from its token
///   endpoint, over TLS) names a key the provider has published: it is fetched for at once, so a
///   key rotation never turns a live grant into a refusal;
/// - a token from outside (a notification, a security event, an identity token a backend passes
///   on) can be made up by anyone: a `kid` the cache lacks is fetched for at most once per
///   `unknownKeyInterval`, and the token waits for that fetch (up to ``maximumHeld`` tokens at
///   once) instead of being refused unheard, since Apple does not send a notification twice.
///
/// Either way one fetch runs at a time and concurrent callers share it; after a failed fetch none
/// starts for `minimumRefreshInterval`, doubling with consecutive failures up to
/// ``maximumRetryInterval``, and while the last fetch failed,
/// tokens whose key is not cached get that failure (the keys are unavailable, not the key
/// unknown). Keys are kept for the response's `max-age`, but never less than
/// `minimumRefreshInterval` (a `max-age=0` must not make every token a fetch) and never more than
/// ``maximumLifetime`` (a retired key stops being trusted); ``defaultLifetime`` without one.
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
    /// The default least time between two fetches that tokens from outside with a `kid` the cache
    /// lacks make: short enough for a notification to wait for it.
    public static let defaultUnknownKeyInterval: Duration = .seconds(10)
    /// The longest a token from outside waits for the next allowed fetch.
    public static let maximumHold: Duration = .seconds(15)
    /// Tokens from outside that wait for the next fetch at one time; more are answered at once
    /// with ``KeysNotYetFetched`` (a flood of made-up `kid`s holds no more than this).
    public static let maximumHeld = 256

    /// Where a token comes from.
    public enum Origin: Sendable, Hashable {
        /// The provider's answer to Revoker's own call: its keys are fetched at once for a `kid`
        /// the cache lacks (still one fetch in flight).
        case providerAnswer
        /// Anyone may have sent it: a `kid` the cache lacks is fetched for at most once per
        /// interval, the token waiting for that fetch.
        case outside
    }

    /// A token from outside named a key the cache lacks while no fetch was allowed and no more
    /// tokens could wait for one: the sender should try again after `retryAfter`.
    public struct KeysNotYetFetched: Error, Sendable, Hashable {
        public let retryAfter: Duration
    }

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
    private let clock: ElapsedClock
    private let minimumRefreshInterval: Duration
    private let unknownKeyInterval: Duration
    private var keys = JWTKeyCollection()
    private var knownKeyIDs: Set<String> = []
    /// When the cached keys stop being trusted; nil before the first successful fetch.
    private var expiresAt: Duration?
    /// No fetch starts before this.
    private var nextAttempt: Duration?
    /// What the last fetch threw, while no fetch has succeeded since.
    private var lastFailure: (any Error)?
    private var consecutiveFailures = 0
    private var refreshing: Task<Void, any Error>?
    /// Tokens from outside waiting for the next allowed fetch.
    private var held = 0
    /// How many fetches were started (failed ones included), for tests and diagnostics.
    public private(set) var fetches = 0
    /// How many tokens from outside are waiting for the next allowed fetch now.
    public var waiting: Int { held }

    /// - Parameters:
    ///   - minimumRefreshInterval: the least time keys are cached, and the pause after a failed fetch.
    ///   - unknownKeyInterval: the least time between two fetches for tokens from outside naming a
    ///     `kid` the cache lacks (at most `minimumRefreshInterval`).
    ///   - clock: what lifetimes, pauses and waits are measured by.
    public init(
        minimumRefreshInterval: Duration = .seconds(60),
        unknownKeyInterval: Duration = defaultUnknownKeyInterval,
        clock: ElapsedClock = .continuous,
        fetch: @escaping Fetch
    ) {
        self.fetch = fetch
        self.clock = clock
        self.minimumRefreshInterval = minimumRefreshInterval
        self.unknownKeyInterval = min(unknownKeyInterval, minimumRefreshInterval)
    }

    /// Checks that `token` is a compact JWS whose header says RS256 with a `kid` the provider
    /// publishes and no `crit`, and that its signature verifies with that key; returns the `kid`
    /// and the payload. Only the signature is checked here: the caller checks every claim.
    ///
    /// Throws ``Rejection``, what `fetch` threw when the keys cannot be fetched, or
    /// ``KeysNotYetFetched`` for a token from outside that cannot wait for the next fetch.
    public func verify<Payload: JWTPayload>(
        _ token: String,
        as _: Payload.Type,
        from origin: Origin
    ) async throws -> (kid: String, payload: Payload) {
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
        try await prepare(for: kid, from: origin)
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

    /// Fetches the keys when the cache cannot answer for `kid`: at once for the provider's
    /// answer, else once a fetch is allowed, waiting for it.
    private func prepare(for kid: String, from origin: Origin) async throws {
        // Counted, not timed: two readings of a clock can be equal.
        let fetchesBeforeArrival = fetches
        while true {
            let now = clock.now()
            let known = knownKeyIDs.contains(kid)
            if known, let expiresAt, now < expiresAt { return }
            if let refreshing {
                try await refreshing.value
                continue
            }
            // A fetch that started after the token arrived has answered for it.
            if fetches > fetchesBeforeArrival {
                if let lastFailure { throw lastFailure }
                return
            }
            if let nextAttempt, now < nextAttempt {
                // After a failure the keys are unavailable to everyone until the pause is over.
                if let lastFailure { throw lastFailure }
                if known { return }
                if origin == .outside {
                    guard held < Self.maximumHeld, nextAttempt - now <= Self.maximumHold else {
                        throw KeysNotYetFetched(retryAfter: nextAttempt - now)
                    }
                    held += 1
                    defer { held -= 1 }
                    try await clock.sleep(nextAttempt)
                    continue
                }
            }
            fetches += 1
            let task = Task { try await self.load() }
            refreshing = task
            try await task.value
        }
    }

    private func load() async throws {
        defer { refreshing = nil }
        let jwks: JWKS
        let maxAge: Duration?
        do {
            (jwks, maxAge) = try await fetch()
        } catch {
            consecutiveFailures += 1
            lastFailure = error
            nextAttempt = clock.now() + Self.retryInterval(afterFailures: consecutiveFailures, minimumRefreshInterval: minimumRefreshInterval)
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
        let now = clock.now()
        keys = fresh
        knownKeyIDs = ids
        consecutiveFailures = 0
        lastFailure = nil
        nextAttempt = now + unknownKeyInterval
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
