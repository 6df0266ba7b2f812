import AppleSignIn
import CryptoExtras
import Foundation
import JWTKit

/// Signs the sandbox's RS256 identity tokens and publishes their keys, like `/auth/keys`.
/// Rotation adds a key and signs with it from then on, keeping the old one published.
actor SandboxIdentityTokens {
    private let keys = JWTKeyCollection()
    private var published: [[String: String]] = []
    /// The current key, for notifications signed by hand (their `events` claim and the
    /// refusable variants do not fit a typed payload).
    private var currentKey: _RSA.Signing.PrivateKey?
    private(set) var currentKeyID = ""
    private(set) var jwksJSON = Data("{\"keys\":[]}".utf8)

    init() async throws {
        try await rotate()
    }

    /// Generates a fresh 2048-bit key, publishes it and makes it current. Returns its `kid`.
    @discardableResult
    func rotate() async throws -> String {
        let backing = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let key = try Insecure.RSA.PrivateKey(backing: backing)
        let kid = "sbx" + SandboxState.randomHex().prefix(12)
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        let primitives = try key.publicKey.getKeyPrimitives()
        published.append([
            "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
            "n": primitives.modulus.base64URLEncoded, "e": primitives.publicExponent.base64URLEncoded,
        ])
        currentKeyID = kid
        currentKey = backing
        jwksJSON = try JSONSerialization.data(withJSONObject: ["keys": published], options: [.sortedKeys])
        return kid
    }

    /// The current key's published JWK, as JSON.
    var currentJWK: Data {
        (try? JSONSerialization.data(withJSONObject: published.last ?? [:], options: [.sortedKeys])) ?? Data()
    }

    /// A key that is never published, for forgeries; made once, as RSA key generation is slow.
    private var unpublishedKey: _RSA.Signing.PrivateKey?

    /// A compact JWS over `header` and `claims`, RS256-signed with the current key, or with a
    /// key that is never published.
    func signRS256(header: [String: Any], claims: [String: Any], unpublished: Bool = false) throws -> String {
        if unpublished, unpublishedKey == nil { unpublishedKey = try _RSA.Signing.PrivateKey(keySize: .bits2048) }
        // `init` always makes a current key; the guard only satisfies the optional.
        guard let signer = unpublished ? unpublishedKey : currentKey else { throw NoSigningKey() }
        let input = try Self.segment(header) + "." + Self.segment(claims)
        let signature = try signer.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + signature.rawRepresentation.base64URLEncoded
    }

    static func segment(_ object: [String: Any]) throws -> String {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).base64URLEncoded
    }

    func sign(_ claims: AppleIdentityClaims) async throws -> String {
        var header = JWTHeader()
        header.alg = "RS256"
        return try await keys.sign(claims, kid: JWKIdentifier(string: currentKeyID), header: header)
    }
}

struct NoSigningKey: Error {}

extension Data {
    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
