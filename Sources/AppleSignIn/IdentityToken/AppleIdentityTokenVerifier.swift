import Foundation
import JWTKit
import Logging
import RevokerProvider

/// The claims of Apple's identity token that Revoker uses.
public struct AppleIdentityClaims: JWTPayload, Equatable {
    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case subject = "sub"
        case audience = "aud"
        case issuedAt = "iat"
        case expires = "exp"
        case email
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
    }

    /// Apple's issuer value.
    public static let appleIssuer = "https://appleid.apple.com"

    public var issuer: IssuerClaim
    /// The Apple user id: stable per team.
    public var subject: SubjectClaim
    public var audience: AudienceClaim
    public var issuedAt: IssuedAtClaim
    public var expires: ExpirationClaim
    public var email: String?
    /// Apple sends it as a boolean or as the string "true"/"false"; both decode.
    public var emailVerified: BoolClaim?
    /// Apple sends it as a boolean or as the string "true"/"false"; both decode.
    public var isPrivateEmail: BoolClaim?

    public init(
        issuer: String = Self.appleIssuer,
        subject: String,
        audience: String,
        issuedAt: Date,
        expires: Date,
        email: String? = nil,
        emailVerified: BoolClaim? = nil,
        isPrivateEmail: BoolClaim? = nil
    ) {
        self.issuer = IssuerClaim(value: issuer)
        self.subject = SubjectClaim(value: subject)
        self.audience = AudienceClaim(value: audience)
        self.issuedAt = IssuedAtClaim(value: issuedAt)
        self.expires = ExpirationClaim(value: expires)
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
    }

    /// The Apple user id (`sub`).
    public var userID: String { subject.value }

    /// Signature only; claims are checked by ``AppleIdentityTokenVerifier`` with the expected audience.
    public func verify(using _: some JWTAlgorithm) {}
}

/// Verifies the `id_token` that `/auth/token` returns: RS256 against Apple's published keys
/// (``AppleKeySet``), then `iss`, `aud` and `exp`.
public struct AppleIdentityTokenVerifier: Sendable {
    /// Apple's keys, shared with the notification verifier.
    public let keys: AppleKeySet
    private let leeway: TimeInterval

    /// - Parameters:
    ///   - minimumRefreshInterval: stops a flood of tokens with made-up `kid`s from hammering Apple.
    ///   - leeway: clock skew tolerated on `exp`.
    public init(client: AppleClient, minimumRefreshInterval: Duration = .seconds(60), leeway: Duration = .seconds(60)) {
        self.init(keys: AppleKeySet(client: client, minimumRefreshInterval: minimumRefreshInterval), leeway: leeway)
    }

    /// A verifier over an existing key set.
    public init(keys: AppleKeySet, leeway: Duration = .seconds(60)) {
        self.keys = keys
        self.leeway = TimeInterval(leeway.components.seconds)
    }

    /// Verifies `token` for `clientID` and returns its claims. `origin` is where it came from:
    /// Apple's answer to Revoker's own call, or outside (a backend passing on what its app got).
    ///
    /// Throws ``AppleSignInError`` when the token is bad, ``AppleAPIError`` when Apple's keys
    /// cannot be fetched.
    public func verify(
        _ token: String,
        clientID: String,
        from origin: RS256KeySet.Origin = .outside,
        now: Date = Date()
    ) async throws -> AppleIdentityClaims {
        let claims = try await keys.verifySignature(token, as: AppleIdentityClaims.self, of: .identityToken, from: origin).payload
        guard claims.issuer.value == AppleIdentityClaims.appleIssuer else {
            throw AppleSignInError(.wrongIssuer, "The identity token was issued by '\(claims.issuer.value.prefix(100))', not Apple.")
        }
        guard claims.audience.value.contains(clientID) else {
            throw AppleSignInError(.wrongAudience, "The identity token was issued to another client_id, not \(clientID).")
        }
        guard claims.expires.value.addingTimeInterval(leeway) > now else {
            throw AppleSignInError(.expiredIdentityToken, "The identity token expired at \(claims.expires.value).")
        }
        return claims
    }
}
