import Foundation
import JWTKit

/// The claims of a Sign in with Apple client secret.
public struct ClientSecretClaims: JWTPayload, Equatable {
    /// Apple's fixed audience for client secrets.
    public static let audience = "https://appleid.apple.com"

    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case issuedAt = "iat"
        case expires = "exp"
        case audience = "aud"
        case subject = "sub"
    }

    /// The Team ID.
    public var issuer: IssuerClaim
    /// When it was signed.
    public var issuedAt: IssuedAtClaim
    /// When Apple stops accepting it.
    public var expires: ExpirationClaim
    /// Always ``audience``.
    public var audience: AudienceClaim
    /// The client_id.
    public var subject: SubjectClaim

    public init(issuer: String, subject: String, issuedAt: Date, expires: Date, audience: String = Self.audience) {
        self.issuer = IssuerClaim(value: issuer)
        self.subject = SubjectClaim(value: subject)
        self.issuedAt = IssuedAtClaim(value: issuedAt)
        self.expires = ExpirationClaim(value: expires)
        self.audience = AudienceClaim(value: audience)
    }

    /// Signature checks only; the claims are checked against the app by whoever verifies,
    /// because that needs the registered Team ID and client_id.
    public func verify(using _: some JWTAlgorithm) {}
}

/// Signs fresh ES256 client secrets for one app.
///
/// A secret is short-lived by default and never longer than Apple's maximum of
/// 15,777,000 seconds; a fresh one is signed for every request so a leaked secret is
/// worth little.
public struct ClientSecretSigner: Sendable {
    /// Apple's upper bound on `exp - iat`.
    public static let maximumLifetime: Duration = .seconds(15_777_000)
    /// The lifetime used when none is given: long enough for one exchange and one revoke.
    public static let defaultLifetime: Duration = .seconds(300)

    /// The app whose secrets this signs.
    public let app: AppleApp
    /// How long each secret is valid.
    public let lifetime: Duration
    private let keys: JWTKeyCollection

    /// Creates a signer; the lifetime must be positive and at most ``maximumLifetime``.
    public init(app: AppleApp, lifetime: Duration = Self.defaultLifetime) async throws(AppleSignInError) {
        guard lifetime > .zero, lifetime <= Self.maximumLifetime else {
            throw AppleSignInError(
                .invalidSecretLifetime,
                "A client secret lifetime of \(lifetime.components.seconds) s is outside 1...15777000 s (Apple's maximum)."
            )
        }
        self.app = app
        self.lifetime = lifetime
        self.keys = JWTKeyCollection()
        do {
            await self.keys.add(ecdsa: try ES256PrivateKey(backing: app.signingKey.privateKey), kid: JWKIdentifier(string: app.keyID))
        } catch {
            throw AppleSignInError(.signingFailed, "The key for \(app.clientID) cannot sign ES256.")
        }
    }

    /// Signs a secret valid from `now` for ``lifetime``.
    public func sign(now: Date = Date()) async throws(AppleSignInError) -> String {
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = ClientSecretClaims(
            issuer: app.teamID,
            subject: app.clientID,
            issuedAt: issuedAt,
            expires: issuedAt.addingTimeInterval(TimeInterval(lifetime.components.seconds))
        )
        var header = JWTHeader()
        header.alg = "ES256"
        do {
            return try await keys.sign(claims, kid: JWKIdentifier(string: app.keyID), header: header)
        } catch {
            throw AppleSignInError(.signingFailed, "Could not sign a client secret for \(app.clientID).")
        }
    }
}
