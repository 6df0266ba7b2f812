import Crypto
import CryptoExtras
import Foundation
import JWTKit

/// A sandbox's RS256 signing keys and their published JWKS, as a provider signs identity tokens
/// and notifications. Rotation adds a key and signs with it from then on, keeping the old ones
/// published until they are retired.
package actor SandboxSigningKeys {
    private let keys = JWTKeyCollection()
    private var published: [[String: String]] = []
    /// The current key, for tokens signed by hand (claims that do not fit a typed payload, and
    /// the variants a verifier must refuse).
    private var currentKey: _RSA.Signing.PrivateKey?
    package private(set) var currentKeyID = ""
    package private(set) var jwksJSON = Data("{\"keys\":[]}".utf8)

    package init() async throws {
        try await rotate(to: Self.firstKey.get())
    }

    /// The key every sandbox of the process starts with, each under a `kid` of its own: making
    /// a 2048-bit key takes a fraction of a second of CPU, and a test run starts hundreds of
    /// sandboxes (two keys each) at once. A rotation still makes a fresh key.
    private static let firstKey = Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    /// Generates a fresh 2048-bit key, publishes it and makes it current; with `retire`, every
    /// older key stops being published. Returns the new `kid`.
    @discardableResult
    package func rotate(retire: Bool = false) async throws -> String {
        try await rotate(to: _RSA.Signing.PrivateKey(keySize: .bits2048), retire: retire)
    }

    @discardableResult
    private func rotate(to backing: _RSA.Signing.PrivateKey, retire: Bool = false) async throws -> String {
        let key = try Insecure.RSA.PrivateKey(backing: backing)
        let kid = "sbx" + SandboxRandom.hex().prefix(12)
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        let primitives = try key.publicKey.getKeyPrimitives()
        if retire { published.removeAll() }
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
    package var currentJWK: Data {
        (try? JSONSerialization.data(withJSONObject: published.last ?? [:], options: [.sortedKeys])) ?? Data()
    }

    /// A key that no sandbox publishes, for forgeries; made once per process, on first use, as
    /// RSA key generation is slow.
    private static let unpublishedKey = Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    /// How a hand-signed token is made: as the provider signs it, or broken in one of the ways a
    /// verifier must refuse.
    package enum Signature: Sendable {
        /// RS256 with the current, published key.
        case genuine
        /// RS256 with a key that is never published, under the current `kid`.
        case forged
        /// RS256 with a key that is never published, under a `kid` nobody publishes.
        case unknownKey
        /// `alg: none` and no signature.
        case algorithmNone
        /// HS256 keyed with the current public JWK (the classic algorithm confusion).
        case hmacWithPublicKey
        /// RS256 with the current, published key, bent after or around signing.
        case bent(SandboxTokenBend)
    }

    /// A compact JWS over `claims` with the header `{alg, kid}` plus `header`.
    package func sign(claims: [String: Any], header extra: [String: Any] = [:], _ signature: Signature = .genuine) throws -> String {
        var header: [String: Any] = ["alg": "RS256", "kid": currentKeyID]
        header.merge(extra) { _, new in new }
        switch signature {
        case .genuine:
            return try signRS256(header: header, claims: claims, with: currentKey)
        case .forged:
            return try signRS256(header: header, claims: claims, with: unpublished())
        case .unknownKey:
            header["kid"] = "sbx-unpublished"
            return try signRS256(header: header, claims: claims, with: unpublished())
        case .algorithmNone:
            header["alg"] = "none"
            return try Self.segment(header) + "." + Self.segment(claims) + "."
        case .hmacWithPublicKey:
            header["alg"] = "HS256"
            let input = try Self.segment(header) + "." + Self.segment(claims)
            let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: currentJWK))
            return input + "." + Data(mac).base64URLEncoded
        case .bent(.criticalHeader):
            header["crit"] = ["sbx-extension"]
            header["sbx-extension"] = true
            return try signRS256(header: header, claims: claims, with: currentKey)
        case .bent(let bend):
            return bend.apply(to: try signRS256(header: header, claims: claims, with: currentKey))
        }
    }

    private func unpublished() throws -> _RSA.Signing.PrivateKey {
        try Self.unpublishedKey.get()
    }

    private func signRS256(header: [String: Any], claims: [String: Any], with signer: _RSA.Signing.PrivateKey?) throws -> String {
        // `init` always makes a current key; the guard only satisfies the optional.
        guard let signer else { throw NoSigningKey() }
        let input = try Self.segment(header) + "." + Self.segment(claims)
        let signature = try signer.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + signature.rawRepresentation.base64URLEncoded
    }

    package static func segment(_ object: [String: Any]) throws -> String {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).base64URLEncoded
    }

    /// A typed payload signed with the current key.
    package func sign(_ claims: some JWTPayload) async throws -> String {
        var header = JWTHeader()
        header.alg = "RS256"
        return try await keys.sign(claims, kid: JWKIdentifier(string: currentKeyID), header: header)
    }
}

struct NoSigningKey: Error {}

/// A genuinely signed token bent in a way a strict verifier refuses; the signature of the
/// bent signatures still verifies for a lenient one (jwt-kit reads past the bend).
public enum SandboxTokenBend: String, Codable, Sendable, CaseIterable {
    /// The header carries `crit` naming an extension (RFC 7515 §4.1.11), signed with it.
    case criticalHeader = "crit_header"
    /// The signature with base64 padding (`==`) after it.
    case paddedSignature = "padded_signature"
    /// A period after the signature.
    case trailingPeriod = "trailing_period"
    /// The signature's last character with unused bits set: other text, same bytes.
    case nonCanonicalSignature = "noncanonical_signature"

    /// The token, bent after signing (``criticalHeader`` is bent before, in the header).
    package func apply(to token: String) -> String {
        switch self {
        case .criticalHeader: return token
        case .paddedSignature: return token + "=="
        case .trailingPeriod: return token + "."
        case .nonCanonicalSignature:
            // An RSA-2048 signature is 342 characters: the last holds 2 bits and 4 unused ones.
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            guard let last = token.last, let value = alphabet.firstIndex(of: last) else { return token }
            return String(token.dropLast()) + String(alphabet[value | 1])
        }
    }
}

/// How a hand-made token is signed.
public enum SandboxJWTSignature: String, Codable, Sendable, CaseIterable {
    case genuine
    /// A key that is never published, under the current `kid`.
    case forged
    /// A key that is never published, under a `kid` nobody publishes.
    case unknownKey = "unknown_kid"
    /// `alg: none`.
    case algorithmNone = "alg_none"
    /// HS256 keyed with the public key.
    case hmacWithPublicKey = "hs256_public_key"
    /// The genuine signature, bent (``SandboxTokenBend``).
    case criticalHeader = "crit_header"
    case paddedSignature = "padded_signature"
    case trailingPeriod = "trailing_period"
    case nonCanonicalSignature = "noncanonical_signature"

    package var signing: SandboxSigningKeys.Signature {
        switch self {
        case .genuine: .genuine
        case .forged: .forged
        case .unknownKey: .unknownKey
        case .algorithmNone: .algorithmNone
        case .hmacWithPublicKey: .hmacWithPublicKey
        case .criticalHeader: .bent(.criticalHeader)
        case .paddedSignature: .bent(.paddedSignature)
        case .trailingPeriod: .bent(.trailingPeriod)
        case .nonCanonicalSignature: .bent(.nonCanonicalSignature)
        }
    }
}
