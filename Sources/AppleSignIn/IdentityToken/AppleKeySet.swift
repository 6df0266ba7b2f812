import Foundation
import JWTKit

/// Apple's signing keys from `{base}/auth/keys`, shared by everything Apple signs with them:
/// identity tokens and server-to-server notifications.
///
/// Keys are cached by `kid` and fetched again when a token names a key the cache does not hold
/// (Apple rotates keys), at most once per `minimumRefreshInterval`, so a flood of made-up
/// `kid`s cannot hammer Apple.
public actor AppleKeySet {
    private let client: AppleClient
    private let minimumRefreshInterval: Duration
    private var keys = JWTKeyCollection()
    private var knownKeyIDs: Set<String> = []
    private var lastRefresh: ContinuousClock.Instant?

    public init(client: AppleClient, minimumRefreshInterval: Duration = .seconds(60)) {
        self.client = client
        self.minimumRefreshInterval = minimumRefreshInterval
    }

    /// What a verified token is, for messages and error codes.
    enum Subject: Sendable {
        case identityToken
        case notification

        var noun: String {
            switch self {
            case .identityToken: "The identity token"
            case .notification: "The notification"
            }
        }

        var malformed: AppleSignInError.Code {
            switch self {
            case .identityToken: .malformedIdentityToken
            case .notification: .malformedNotification
            }
        }
    }

    /// Checks that `token` is a compact JWS whose header says RS256 with a `kid` Apple
    /// publishes, and that its signature verifies with that key; returns the header's `kid` and
    /// the payload decoded as `Payload` (a payload that does not decode is malformed).
    ///
    /// Only the signature is checked here: the caller checks every claim.
    func verifySignature<Payload: JWTPayload>(
        _ token: String,
        as _: Payload.Type,
        of subject: Subject
    ) async throws -> (kid: String, payload: Payload) {
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(Array(token.utf8), as: Payload.self).header
        } catch {
            throw AppleSignInError(subject.malformed, "\(subject.noun) is not a well-formed JWS.")
        }
        // One algorithm only: `none`, HS256 keyed with the public key and the like never reach a key.
        guard header.alg == "RS256" else {
            throw AppleSignInError(.unsupportedAlgorithm, "\(subject.noun) is not signed with RS256.")
        }
        guard let kid = header.kid, !kid.isEmpty else {
            throw AppleSignInError(subject.malformed, "\(subject.noun) names no signing key (kid).")
        }
        if !knownKeyIDs.contains(kid) {
            try await refresh()
            guard knownKeyIDs.contains(kid) else {
                throw AppleSignInError(.unknownSigningKey, "\(subject.noun) is signed with a key Apple does not publish.")
            }
        }
        do {
            return (kid, try await keys.verify(token, as: Payload.self))
        } catch {
            throw AppleSignInError(.invalidSignature, "\(subject.noun)'s signature does not verify with Apple's key.")
        }
    }

    private func refresh() async throws {
        if let lastRefresh, ContinuousClock.now - lastRefresh < minimumRefreshInterval, !knownKeyIDs.isEmpty { return }
        lastRefresh = .now
        let jwks = try await client.keys()
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
        keys = fresh
        knownKeyIDs = ids
    }
}
