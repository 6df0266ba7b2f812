import Foundation
import JWTKit
import RevokerProvider

/// The claims of Google's ID token that Revoker uses.
public struct GoogleIdentityClaims: JWTPayload, Equatable {
    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case subject = "sub"
        case audience = "aud"
        case authorizedParty = "azp"
        case issuedAt = "iat"
        case expires = "exp"
        case email
        case emailVerified = "email_verified"
        case hostedDomain = "hd"
    }

    /// Google writes its issuer both ways.
    public static let googleIssuers: Set<String> = ["https://accounts.google.com", "accounts.google.com"]

    public var issuer: IssuerClaim
    /// The Google user id: stable, unique per Google account.
    public var subject: SubjectClaim
    public var audience: AudienceClaim
    /// The client the token was issued to, when it differs from the audience.
    public var authorizedParty: String?
    public var issuedAt: IssuedAtClaim
    public var expires: ExpirationClaim
    public var email: String?
    /// Google sends a boolean, some libraries the string "true"/"false"; both decode.
    public var emailVerified: BoolClaim?
    /// The Google Workspace domain of the account, when it has one.
    public var hostedDomain: String?

    public init(
        issuer: String = "https://accounts.google.com",
        subject: String,
        audience: String,
        authorizedParty: String? = nil,
        issuedAt: Date,
        expires: Date,
        email: String? = nil,
        emailVerified: BoolClaim? = nil,
        hostedDomain: String? = nil
    ) {
        self.issuer = IssuerClaim(value: issuer)
        self.subject = SubjectClaim(value: subject)
        self.audience = AudienceClaim(value: audience)
        self.authorizedParty = authorizedParty
        self.issuedAt = IssuedAtClaim(value: issuedAt)
        self.expires = ExpirationClaim(value: expires)
        self.email = email
        self.emailVerified = emailVerified
        self.hostedDomain = hostedDomain
    }

    /// The Google user id (`sub`).
    public var googleUserID: String { subject.value }

    /// Signature only; ``GoogleIdentityTokenVerifier`` checks the claims against the app.
    public func verify(using _: some JWTAlgorithm) {}
}

/// Google's identity-token keys from its JWKS, cached per `Cache-Control: max-age` (at least
/// `minimumRefreshInterval`, at most a day) and fetched again for an unknown `kid`: at once for
/// Google's own answers, at most once per `unknownKeyInterval` for tokens from outside, one fetch
/// at a time (``RS256KeySet``).
public struct GoogleKeySet: Sendable {
    public let keys: RS256KeySet

    public init(
        client: GoogleClient,
        minimumRefreshInterval: Duration = .seconds(60),
        unknownKeyInterval: Duration = RS256KeySet.defaultUnknownKeyInterval,
        clock: ElapsedClock = .continuous
    ) {
        self.keys = RS256KeySet(minimumRefreshInterval: minimumRefreshInterval, unknownKeyInterval: unknownKeyInterval, clock: clock) {
            try await client.keys()
        }
    }

    /// The keys of Cross-Account Protection's security events: the `jwks_uri` of its discovery
    /// document, which is read again only when the keys are (so under the same limits).
    public static func risc(client: GoogleClient, minimumRefreshInterval: Duration = .seconds(60)) -> GoogleKeySet {
        GoogleKeySet(keys: RS256KeySet(minimumRefreshInterval: minimumRefreshInterval) { try await client.riscKeys() })
    }

    private init(keys: RS256KeySet) {
        self.keys = keys
    }

    /// Checks the signature (RS256, a published `kid`) and decodes the payload; `noun` names
    /// the token in messages and `malformed` is the code for a token that is not one.
    func verifySignature<Payload: JWTPayload>(
        _ token: String,
        as _: Payload.Type,
        noun: String,
        malformed: GoogleSignInError.Code,
        from origin: RS256KeySet.Origin
    ) async throws -> (kid: String, payload: Payload) {
        do {
            return try await keys.verify(token, as: Payload.self, from: origin)
        } catch let wait as RS256KeySet.KeysNotYetFetched {
            throw ProviderFailure(
                endpoint: GoogleEndpoint.certs.rawValue,
                classification: .transient,
                httpStatus: nil,
                retryAfter: wait.retryAfter,
                detail: "\(noun) names a key Google's keys were not fetched for yet"
            )
        } catch let rejection as RS256KeySet.Rejection {
            switch rejection {
            case .malformed: throw GoogleSignInError(malformed, "\(noun) is not a well-formed JWS with Google's claims.")
            case .criticalHeader: throw GoogleSignInError(malformed, "\(noun) names critical header parameters (crit), which are not supported.")
            case .unsupportedAlgorithm: throw GoogleSignInError(.unsupportedAlgorithm, "\(noun) is not signed with RS256.")
            case .missingKeyID: throw GoogleSignInError(malformed, "\(noun) names no signing key (kid).")
            case .unknownKey: throw GoogleSignInError(.unknownSigningKey, "\(noun) is signed with a key Google does not publish.")
            case .invalidSignature: throw GoogleSignInError(.invalidSignature, "\(noun)'s signature does not verify with Google's key.")
            }
        }
    }
}

/// Verifies Google ID tokens as Google's backend guide says: RS256 by `kid` from Google's keys,
/// `iss` in either spelling, `aud` one of the app's client IDs, `exp` and `iat` within the skew.
public struct GoogleIdentityTokenVerifier: Sendable {
    public let keys: GoogleKeySet
    private let leeway: TimeInterval

    public init(keys: GoogleKeySet, leeway: Duration = .seconds(60)) {
        self.keys = keys
        self.leeway = TimeInterval(leeway.components.seconds)
    }

    /// Verifies `token` for an app whose client IDs are `audiences` and returns its claims.
    /// `origin` is where it came from: Google's answer to Revoker's own call, or outside (a
    /// backend passing on what its app got).
    ///
    /// Throws ``GoogleSignInError`` when the token is bad, ``ProviderFailure`` when Google's keys
    /// cannot be fetched.
    public func verify(
        _ token: String,
        audiences: [String],
        from origin: RS256KeySet.Origin = .outside,
        now: Date = Date()
    ) async throws -> GoogleIdentityClaims {
        let noun = "The identity token"
        let claims = try await keys.verifySignature(
            token,
            as: GoogleIdentityClaims.self,
            noun: noun,
            malformed: .malformedIdentityToken,
            from: origin
        ).payload
        guard GoogleIdentityClaims.googleIssuers.contains(claims.issuer.value) else {
            throw GoogleSignInError(.wrongIssuer, "\(noun) was issued by '\(claims.issuer.value.prefix(100))', not Google.")
        }
        let audience = claims.audience.value
        let accepted: Bool =
            if audience.count == 1 {
                audiences.contains(audience[0])
            } else {
                // Several audiences: the authorized party must be the app's (OpenID Connect Core 3.1.3.7).
                audience.contains(where: audiences.contains) && claims.authorizedParty.map(audiences.contains) == true
            }
        guard accepted else {
            throw GoogleSignInError(.wrongAudience, "\(noun) was issued to a client ID that is not one of the app's.")
        }
        guard claims.expires.value.addingTimeInterval(leeway) > now else {
            throw GoogleSignInError(.expiredIdentityToken, "\(noun) expired at \(claims.expires.value).")
        }
        guard claims.issuedAt.value <= now.addingTimeInterval(leeway) else {
            throw GoogleSignInError(.issuedInFuture, "\(noun) was issued in the future (\(claims.issuedAt.value)).")
        }
        guard !claims.subject.value.isEmpty, claims.subject.value.utf8.count <= 255 else {
            throw GoogleSignInError(.malformedIdentityToken, "\(noun) has no usable sub.")
        }
        return claims
    }
}
