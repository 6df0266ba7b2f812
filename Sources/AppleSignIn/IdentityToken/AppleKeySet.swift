import Foundation
import JWTKit
import RevokerProvider

/// Apple's signing keys from `{base}/auth/keys`, shared by everything Apple signs with them:
/// identity tokens and server-to-server notifications.
///
/// Keys are cached by `kid` for Apple's `max-age` when it sends one, else for an hour
/// (``RS256KeySet/defaultLifetime``), so a key Apple retires stops being trusted; they are
/// fetched again when a token names a key the cache does not hold (Apple rotates keys): at once
/// for Apple's own answers, at most once per `unknownKeyInterval` for tokens from outside, one
/// fetch at a time (``RS256KeySet``).
public struct AppleKeySet: Sendable {
    let keys: RS256KeySet

    public init(
        client: AppleClient,
        minimumRefreshInterval: Duration = .seconds(60),
        unknownKeyInterval: Duration = RS256KeySet.defaultUnknownKeyInterval,
        clock: ElapsedClock = .continuous
    ) {
        self.keys = RS256KeySet(minimumRefreshInterval: minimumRefreshInterval, unknownKeyInterval: unknownKeyInterval, clock: clock) {
            try await client.keys()
        }
    }

    /// How many fetches of Apple's keys were started, failed ones included.
    public var fetches: Int {
        get async { await keys.fetches }
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
    /// Only the signature is checked here: the caller checks every claim. `origin` is where the
    /// token came from (``RS256KeySet/Origin``).
    func verifySignature<Payload: JWTPayload>(
        _ token: String,
        as _: Payload.Type,
        of subject: Subject,
        from origin: RS256KeySet.Origin
    ) async throws -> (kid: String, payload: Payload) {
        do {
            return try await keys.verify(token, as: Payload.self, from: origin)
        } catch let wait as RS256KeySet.KeysNotYetFetched {
            throw AppleAPIError(
                endpoint: .keys,
                classification: .transient,
                httpStatus: nil,
                retryAfter: wait.retryAfter,
                detail: "\(subject.noun) names a key Apple's keys were not fetched for yet"
            )
        } catch let rejection as RS256KeySet.Rejection {
            switch rejection {
            case .malformed: throw AppleSignInError(subject.malformed, "\(subject.noun) is not a well-formed JWS.")
            case .criticalHeader:
                throw AppleSignInError(subject.malformed, "\(subject.noun) names critical header parameters (crit), which are not supported.")
            case .unsupportedAlgorithm: throw AppleSignInError(.unsupportedAlgorithm, "\(subject.noun) is not signed with RS256.")
            case .missingKeyID: throw AppleSignInError(subject.malformed, "\(subject.noun) names no signing key (kid).")
            case .unknownKey: throw AppleSignInError(.unknownSigningKey, "\(subject.noun) is signed with a key Apple does not publish.")
            case .invalidSignature: throw AppleSignInError(.invalidSignature, "\(subject.noun)'s signature does not verify with Apple's key.")
            }
        }
    }
}
