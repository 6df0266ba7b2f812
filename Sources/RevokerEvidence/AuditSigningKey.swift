import Crypto
import CryptoExtras
import Foundation

/// The Ed25519 key that signs audit checkpoints and receipts. The service reads it from a file
/// (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` or `revoker keygen --audit` writes it);
/// it is never stored in the database.
public struct AuditSigningKey: Sendable {
    let key: Curve25519.Signing.PrivateKey

    /// A fresh key.
    public init() {
        key = Curve25519.Signing.PrivateKey()
    }

    /// Reads a `PRIVATE KEY` PEM document.
    public init(pemRepresentation: String) throws {
        do {
            key = try Curve25519.Signing.PrivateKey(pemRepresentation: pemRepresentation)
        } catch {
            throw AuditEvidenceError("the audit signing key is not an Ed25519 private key in PEM (PKCS#8)")
        }
    }

    public var pemRepresentation: String { key.pemRepresentation }

    public var publicKey: AuditPublicKey { AuditPublicKey(key.publicKey) }

    func sign(_ message: [UInt8]) throws -> [UInt8] {
        Array(try key.signature(for: message))
    }
}

/// The key that verifies checkpoints and receipts, published by `revoker audit public-key`.
public struct AuditPublicKey: Sendable, Hashable {
    let key: Curve25519.Signing.PublicKey

    init(_ key: Curve25519.Signing.PublicKey) {
        self.key = key
    }

    /// Reads a `PUBLIC KEY` PEM document.
    public init(pemRepresentation: String) throws {
        do {
            key = try Curve25519.Signing.PublicKey(pemRepresentation: pemRepresentation)
        } catch {
            throw AuditEvidenceError("not an Ed25519 public key in PEM")
        }
    }

    public var pemRepresentation: String { key.pemRepresentation }

    /// The first 16 hex digits of SHA-256 over the raw key: how checkpoints name their key.
    public var keyID: String {
        String(SHA256.hash(data: key.rawRepresentation).hex.prefix(16))
    }

    func isValid(signature: [UInt8], for message: [UInt8]) -> Bool {
        key.isValidSignature(signature, for: message)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.key.rawRepresentation == rhs.key.rawRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(key.rawRepresentation) }
}

/// Why evidence could not be made or read.
public struct AuditEvidenceError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension Sequence where Element == UInt8 {
    /// Lowercase hexadecimal.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension [UInt8] {
    /// Bytes from lowercase or uppercase hexadecimal, or nil.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }
}
