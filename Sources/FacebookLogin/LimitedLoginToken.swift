import Foundation
import JWTKit
import RevokerProvider

/// The claims of a Limited Login authentication token (an OpenID Connect ID token) that Revoker uses.
public struct LimitedLoginClaims: JWTPayload, Equatable {
    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case subject = "sub"
        case audience = "aud"
        case issuedAt = "iat"
        case expires = "exp"
        case nonce
        case id = "jti"
    }

    /// The issuers Limited Login's tokens name.
    public static let issuers: Set<String> = ["https://www.facebook.com", "https://limited.facebook.com"]

    public var issuer: IssuerClaim
    /// The app-scoped user id.
    public var subject: SubjectClaim
    /// The app id.
    public var audience: AudienceClaim
    public var issuedAt: IssuedAtClaim
    public var expires: ExpirationClaim
    /// The nonce the app started the sign-in with.
    public var nonce: String?
    public var id: String?

    public init(
        issuer: String = "https://www.facebook.com",
        subject: String,
        audience: String,
        issuedAt: Date,
        expires: Date,
        nonce: String? = nil,
        id: String? = nil
    ) {
        self.issuer = IssuerClaim(value: issuer)
        self.subject = SubjectClaim(value: subject)
        self.audience = AudienceClaim(value: audience)
        self.issuedAt = IssuedAtClaim(value: issuedAt)
        self.expires = ExpirationClaim(value: expires)
        self.nonce = nonce
        self.id = id
    }

    /// Signature only; ``LimitedLoginVerifier`` checks the claims against the app.
    public func verify(using _: some JWTAlgorithm) {}
}

/// Verifies Limited Login tokens as an OpenID Connect ID token is verified: RS256 by `kid` from
/// Facebook's published keys, `iss` Facebook's, `aud` the app id, `exp` and `iat` within the
/// skew, and `nonce` the sign-in's when the caller knows it.
public struct LimitedLoginVerifier: Sendable {
    public let keys: RS256KeySet
    private let leeway: TimeInterval

    public init(client: FacebookClient, minimumRefreshInterval: Duration = .seconds(60), leeway: Duration = .seconds(60)) {
        self.init(keys: RS256KeySet(minimumRefreshInterval: minimumRefreshInterval) { try await client.limitedLoginKeys() }, leeway: leeway)
    }

    public init(keys: RS256KeySet, leeway: Duration = .seconds(60)) {
        self.keys = keys
        self.leeway = leeway.timeInterval
    }

    /// Verifies `token` for the app `appID` and returns its claims.
    ///
    /// Throws ``FacebookLoginError`` when the token is bad, ``ProviderFailure`` when Facebook's
    /// keys cannot be fetched.
    public func verify(_ token: String, appID: String, nonce: String? = nil, now: Date = Date()) async throws -> LimitedLoginClaims {
        let noun = "The Limited Login token"
        let claims: LimitedLoginClaims
        do {
            claims = try await keys.verify(token, as: LimitedLoginClaims.self, from: .outside).payload
        } catch let wait as RS256KeySet.KeysNotYetFetched {
            throw ProviderFailure(
                endpoint: FacebookEndpoint.limitedLoginKeys.rawValue,
                classification: .transient,
                httpStatus: nil,
                retryAfter: wait.retryAfter,
                detail: "\(noun) names a key Facebook's keys were not fetched for yet"
            )
        } catch let rejection as RS256KeySet.Rejection {
            switch rejection {
            case .malformed: throw FacebookLoginError(.malformedIdentityToken, "\(noun) is not a well-formed JWS with Limited Login's claims.")
            case .criticalHeader:
                throw FacebookLoginError(.malformedIdentityToken, "\(noun) names critical header parameters (crit), which are not supported.")
            case .unsupportedAlgorithm: throw FacebookLoginError(.unsupportedAlgorithm, "\(noun) is not signed with RS256.")
            case .missingKeyID: throw FacebookLoginError(.malformedIdentityToken, "\(noun) names no signing key (kid).")
            case .unknownKey: throw FacebookLoginError(.unknownSigningKey, "\(noun) is signed with a key Facebook does not publish.")
            case .invalidSignature: throw FacebookLoginError(.invalidSignature, "\(noun)'s signature does not verify with Facebook's key.")
            }
        }
        guard LimitedLoginClaims.issuers.contains(claims.issuer.value) else {
            throw FacebookLoginError(.wrongIssuer, "\(noun) was issued by '\(claims.issuer.value.prefix(100))', not Facebook.")
        }
        guard claims.audience.value == [appID] else {
            throw FacebookLoginError(.wrongAudience, "\(noun) was issued to another app than \(appID).")
        }
        guard claims.expires.value.addingTimeInterval(leeway) > now else {
            throw FacebookLoginError(.expiredIdentityToken, "\(noun) expired at \(claims.expires.value).")
        }
        guard claims.issuedAt.value <= now.addingTimeInterval(leeway) else {
            throw FacebookLoginError(.issuedInFuture, "\(noun) was issued in the future (\(claims.issuedAt.value)).")
        }
        if let nonce, claims.nonce != nonce {
            throw FacebookLoginError(.wrongNonce, "\(noun)'s nonce is not the one the sign-in was started with.")
        }
        let subject = claims.subject.value
        guard (1...64).contains(subject.utf8.count), subject.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            throw FacebookLoginError(.malformedIdentityToken, "\(noun)'s sub is not an app-scoped user id (digits).")
        }
        return claims
    }
}
