import AppleSignIn
import CryptoExtras
import Foundation
import JWTKit

/// Signs the sandbox's RS256 identity tokens and publishes their keys, like `/auth/keys`.
/// Rotation adds a key and signs with it from then on, keeping the old one published.
actor SandboxIdentityTokens {
    private let keys = JWTKeyCollection()
    private var published: [[String: String]] = []
    private(set) var currentKeyID = ""
    private(set) var jwksJSON = Data("{\"keys\":[]}".utf8)

    init() async throws {
        try await rotate()
    }

    /// Generates a fresh 2048-bit key, publishes it and makes it current. Returns its `kid`.
    @discardableResult
    func rotate() async throws -> String {
        let key = try Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
        let kid = "sbx" + SandboxState.randomHex().prefix(12)
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        let primitives = try key.publicKey.getKeyPrimitives()
        published.append([
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": primitives.modulus.base64URLEncoded, "e": primitives.publicExponent.base64URLEncoded,
        ])
        currentKeyID = kid
        jwksJSON = try JSONSerialization.data(withJSONObject: ["keys": published], options: [.sortedKeys])
        return kid
    }

    func sign(_ claims: AppleIdentityClaims) async throws -> String {
        var header = JWTHeader()
        header.alg = "RS256"
        return try await keys.sign(claims, kid: JWKIdentifier(string: currentKeyID), header: header)
    }
}

extension Data {
    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
