import AppleSignIn
import Crypto
import Foundation
import JWTKit
import Testing

@Suite("Client secrets")
struct ClientSecretSignerTests {
    let key = P256.Signing.PrivateKey()

    func app() throws -> AppleApp {
        try AppleApp(clientID: "com.example.app", teamID: "TEAM000001", keyID: "KEY0000001", signingKey: AppleSigningKey(key))
    }

    @Test func signsAVerifiableES256SecretWithEveryClaim() async throws {
        let signer = try await ClientSecretSigner(app: app(), lifetime: .seconds(300))
        let now = Date(timeIntervalSince1970: 1_800_000_000.7)
        let secret = try await signer.sign(now: now)

        let parts = secret.split(separator: ".")
        #expect(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: try #require(Data(base64URL: parts[0]))) as? [String: String]
        #expect(header?["alg"] == "ES256")
        #expect(header?["kid"] == "KEY0000001")

        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PublicKey(backing: key.publicKey), kid: "KEY0000001")
        let claims = try await keys.verify(secret, as: ClientSecretClaims.self)
        #expect(claims.issuer.value == "TEAM000001")
        #expect(claims.subject.value == "com.example.app")
        #expect(claims.audience.value == ["https://appleid.apple.com"])
        #expect(claims.issuedAt.value == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(claims.expires.value.timeIntervalSince(claims.issuedAt.value) == 300)

        let raw = try JSONSerialization.jsonObject(with: try #require(Data(base64URL: parts[1]))) as? [String: Any]
        #expect(raw?["aud"] as? String == "https://appleid.apple.com", "aud is a plain string, as Apple documents")
        #expect(Set(raw?.keys.map { $0 } ?? []) == ["iss", "iat", "exp", "aud", "sub"])
    }

    @Test func anotherKeyDoesNotVerifyIt() async throws {
        let secret = try await ClientSecretSigner(app: app()).sign()
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PublicKey(backing: P256.Signing.PrivateKey().publicKey), kid: "KEY0000001")
        await #expect(throws: (any Error).self) { try await keys.verify(secret, as: ClientSecretClaims.self) }
    }

    @Test func everySecretIsFresh() async throws {
        let signer = try await ClientSecretSigner(app: app())
        let first = try await signer.sign()
        let second = try await signer.sign()
        #expect(first != second, "ECDSA signatures are randomised, so two secrets never repeat")
    }

    @Test func lifetimeIsBoundedByApplesMaximum() async throws {
        _ = try await ClientSecretSigner(app: app(), lifetime: ClientSecretSigner.maximumLifetime)
        for lifetime: Duration in [.seconds(15_777_001), .zero, .seconds(-5)] {
            await #expect {
                try await ClientSecretSigner(app: app(), lifetime: lifetime)
            } throws: { error in
                (error as? AppleSignInError)?.code == .invalidSecretLifetime
            }
        }
    }
}

extension Data {
    init?(base64URL text: Substring) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}
