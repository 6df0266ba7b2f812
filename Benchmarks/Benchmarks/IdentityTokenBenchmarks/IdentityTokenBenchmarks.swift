import AppleSignIn
import AsyncHTTPClient
import Benchmark
import CryptoExtras
import Foundation
import JWTKit
import RevokerProvider

/// Verifying the `id_token` Apple returns from `/auth/token`: RS256 by `kid`, then the claims.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        timeUnits: .microseconds,
        warmupIterations: 100,
        maxDuration: .seconds(5),
        maxIterations: 20_000
    )

    // The whole public check: signature by kid, alg, iss, aud and exp. Its key set can only be
    // filled over HTTP, so setup serves the JWKS once on loopback, verifies once to fill the
    // cache, and shuts the server and client down: the measured calls cannot reach the network.
    Benchmark("AppleIdentityTokenVerifier.verify") { (benchmark: Benchmark, fixture: AppleVerifierFixture) in
        for _ in benchmark.scaledIterations {
            blackHole(try await fixture.verifier.verify(fixture.token, clientID: SignedToken.clientID))
        }
    } setup: {
        try await AppleVerifierFixture()
    }

    // The layer under it, which takes its keys from a closure: signature only, no claim checks.
    Benchmark("RS256KeySet.verify (signature only)") { (benchmark: Benchmark, fixture: KeySetFixture) in
        for _ in benchmark.scaledIterations {
            blackHole(try await fixture.keySet.verify(fixture.token, as: AppleIdentityClaims.self, from: .providerAnswer))
        }
    } setup: {
        try await KeySetFixture()
    }
}

/// An identity token as Apple issues one (same claims, 2048-bit RSA) and the JWKS publishing its key.
struct SignedToken: Sendable {
    static let clientID = "com.example.revoker.signin"
    static let keyID = "YuyXoY"

    let token: String
    let jwksJSON: Data

    init() async throws {
        let backing = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let key = try Insecure.RSA.PrivateKey(backing: backing)
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: Self.keyID))
        let now = Date()
        let claims = AppleIssuedClaims(
            issuer: IssuerClaim(value: AppleIdentityClaims.appleIssuer),
            audience: AudienceClaim(value: Self.clientID),
            expires: ExpirationClaim(value: now.addingTimeInterval(86_400)),
            issuedAt: IssuedAtClaim(value: now),
            subject: SubjectClaim(value: "001234.5f0c2a9b7e4d4c1a8b6f3e2d1c0b9a87.1042"),
            accessTokenHash: "kE3mPq7XvY2sLb9nTc4wRg",
            email: "x8k2m4p6q9@privaterelay.appleid.com",
            emailVerified: true,
            isPrivateEmail: true,
            authTime: now,
            nonceSupported: true
        )
        var header = JWTHeader()
        header.alg = "RS256"
        token = try await keys.sign(claims, kid: JWKIdentifier(string: Self.keyID), header: header)
        let primitives = try key.publicKey.getKeyPrimitives()
        let jwk: [String: String] = [
            "kty": "RSA", "kid": Self.keyID, "use": "sig", "alg": "RS256",
            "n": primitives.modulus.base64URL, "e": primitives.publicExponent.base64URL,
        ]
        jwksJSON = try JSONSerialization.data(withJSONObject: ["keys": [jwk]], options: [.sortedKeys])
    }
}

/// Apple's identity-token claims as it sends them, more than ``AppleIdentityClaims`` reads.
struct AppleIssuedClaims: JWTPayload {
    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case audience = "aud"
        case expires = "exp"
        case issuedAt = "iat"
        case subject = "sub"
        case accessTokenHash = "at_hash"
        case email
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
        case authTime = "auth_time"
        case nonceSupported = "nonce_supported"
    }

    var issuer: IssuerClaim
    var audience: AudienceClaim
    var expires: ExpirationClaim
    var issuedAt: IssuedAtClaim
    var subject: SubjectClaim
    var accessTokenHash: String
    var email: String
    var emailVerified: Bool
    var isPrivateEmail: Bool
    var authTime: Date
    var nonceSupported: Bool

    func verify(using _: some JWTAlgorithm) {}
}

struct AppleVerifierFixture: Sendable {
    let verifier: AppleIdentityTokenVerifier
    let token: String

    init() async throws {
        let signed = try await SignedToken()
        let server = try await LoopbackJWKSServer.start(serving: signed.jwksJSON)
        let httpClient = ProviderTransport.makeHTTPClient()
        let client = AppleClient(httpClient: httpClient, configuration: .init(baseURL: "http://127.0.0.1:\(server.port)"))
        let verifier = AppleIdentityTokenVerifier(client: client)
        do {
            _ = try await verifier.verify(signed.token, clientID: SignedToken.clientID)
        } catch {
            try? await httpClient.shutdown()
            try? await server.stop()
            throw error
        }
        try await httpClient.shutdown()
        try await server.stop()
        self.verifier = verifier
        self.token = signed.token
    }
}

struct KeySetFixture: Sendable {
    let keySet: RS256KeySet
    let token: String

    init() async throws {
        let signed = try await SignedToken()
        let jwks = try JSONDecoder().decode(JWKS.self, from: signed.jwksJSON)
        keySet = RS256KeySet { (jwks, nil) }
        token = signed.token
        _ = try await keySet.verify(token, as: AppleIdentityClaims.self, from: .providerAnswer)
    }
}

extension Data {
    /// Base64url without padding, as JWKs carry `n` and `e`.
    var base64URL: String {
        base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
