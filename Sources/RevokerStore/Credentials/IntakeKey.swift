import Crypto
import CryptoExtras
import Foundation
import RevokerEvidence

/// An RSA key pair for the SQL intake: PostgreSQL encrypts with the public half (OpenPGP, via pgcrypto), the worker opens with the private half.
///
/// Only the subset of OpenPGP (RFC 4880) that `pgp_pub_encrypt_bytea` produces is accepted: one RSA session key packet,
/// one integrity-protected AES packet, one uncompressed literal data packet. Anything else is refused rather than guessed at.
public struct IntakeKey: Sendable {
    /// swift-crypto's encryption key wraps an immutable, thread-safe BoringSSL key but does not declare `Sendable`.
    private nonisolated(unsafe) let key: _RSA.Encryption.PrivateKey
    private let keyID: [UInt8]
    /// The OpenPGP v4 key ID (low 64 bits of the v4 fingerprint) as 16 lowercase hex digits.
    public let id: String
    /// A binary OpenPGP public key that pgcrypto's `pgp_pub_encrypt(_bytea)` accepts, passed as `bytea` (no armor).
    ///
    /// It is a single v4 Public-Subkey packet (RSA, creation time 0 so the bytes and the id depend on the key alone):
    /// pgcrypto skips primary Public-Key packets and only ever encrypts to a subkey, and it checks no User IDs or signatures.
    public let openPGPPublicKey: [UInt8]

    private init(key: _RSA.Encryption.PrivateKey) throws {
        let primitives: _RSA.Encryption.PublicKey.Primitives
        do { primitives = try key.publicKey.getKeyPrimitives() } catch { throw IntakeKeyError.invalidKey }
        // v4 key material: version, creation time, algorithm 1 (RSA encrypt or sign), MPIs n and e.
        let body: [UInt8] = [4, 0, 0, 0, 0, 1] + Self.mpi(Array(primitives.modulus)) + Self.mpi(Array(primitives.publicExponent))
        let length = [UInt8(truncatingIfNeeded: body.count >> 8), UInt8(truncatingIfNeeded: body.count)]
        let fingerprint = Array(Insecure.SHA1.hash(data: [0x99] + length + body))
        self.key = key
        self.keyID = Array(fingerprint.suffix(8))
        self.id = keyID.hex
        self.openPGPPublicKey = [0xB9] + length + body  // old-format header, tag 14, two-octet length
    }

    /// Creates a fresh RSA 3072 key; store `pemRepresentation` somewhere secret and publish `openPGPPublicKey`.
    public static func generate() throws -> IntakeKey {
        do { return try IntakeKey(key: _RSA.Encryption.PrivateKey(keySize: .bits3072)) } catch { throw IntakeKeyError.invalidKey }
    }

    /// Reads a PKCS#1 or PKCS#8 PEM private key (RSA, at least 2048 bits).
    public init(pemRepresentation: String) throws {
        let key: _RSA.Encryption.PrivateKey
        do { key = try _RSA.Encryption.PrivateKey(pemRepresentation: pemRepresentation) } catch { throw IntakeKeyError.invalidKey }
        try self.init(key: key)
    }

    /// The private key as PEM, for storing it as a secret.
    public var pemRepresentation: String { key.pemRepresentation }

    /// The key ID a message produced by `pgp_pub_encrypt(_bytea)` names in its public-key-encrypted session key packet,
    /// so a caller holding several keys (during rotation) can pick the right one.
    public static func recipientID(of message: [UInt8]) throws -> String {
        try Message(message).keyID.hex
    }

    /// Decrypts a message from `pgp_pub_encrypt_bytea` for this key and returns the literal data's bytes.
    ///
    /// Nothing is returned unless the modification detection code checks out; every failure throws one `IntakeKeyError`.
    public func open(_ message: [UInt8]) throws -> [UInt8] {
        let message = try Message(message)
        guard message.keyID == keyID else { throw IntakeKeyError.wrongRecipient }

        // RSA PKCS#1 v1.5 (the only padding pgcrypto writes); the MPI has no leading zeros, the key wants the full width.
        let width = key.keySizeInBits / 8
        guard message.encryptedSessionKey.count <= width else { throw IntakeKeyError.decryptionFailed }
        let padded = [UInt8](repeating: 0, count: width - message.encryptedSessionKey.count) + message.encryptedSessionKey
        guard let block = try? [UInt8](key.decrypt(padded, padding: ._WEAK_AND_INSECURE_PKCS_V1_5)),
            let algorithm = block.first, let keyLength = Self.aesKeyLengths[algorithm], block.count == 1 + keyLength + 2
        else { throw IntakeKeyError.decryptionFailed }
        let sessionKey = block[1...keyLength]
        let checksum = sessionKey.reduce(0) { ($0 + Int($1)) & 0xFFFF }
        guard checksum == Int(block[keyLength + 1]) << 8 | Int(block[keyLength + 2]) else { throw IntakeKeyError.decryptionFailed }

        // SEIPD: CFB-128 with a zero IV over prefix (16 random + 2 repeated bytes), inner packets and the MDC packet.
        let plain: [UInt8]
        do {
            let iv = try AES._CFB.IV(ivBytes: [UInt8](repeating: 0, count: 16))
            plain = Array(try AES._CFB.decrypt(message.encryptedData, using: SymmetricKey(data: sessionKey), iv: iv))
        } catch { throw IntakeKeyError.decryptionFailed }
        let mdcStart = plain.count - 22
        guard mdcStart >= 18 else { throw IntakeKeyError.decryptionFailed }
        let digest = Insecure.SHA1.hash(data: plain[..<(mdcStart + 2)])
        var difference = (plain[mdcStart] ^ 0xD3) | (plain[mdcStart + 1] ^ 0x14) | (plain[14] ^ plain[16]) | (plain[15] ^ plain[17])
        for (expected, actual) in zip(digest, plain[(mdcStart + 2)...]) { difference |= expected ^ actual }
        guard difference == 0 else { throw IntakeKeyError.decryptionFailed }

        // Authentic from here on: exactly one Literal Data packet (mode, name length, name, 4-byte date, data).
        var inner = PacketReader(bytes: plain[18..<mdcStart])
        let literal = try inner.next()
        guard literal.tag == 11, inner.isAtEnd else { throw IntakeKeyError.unsupportedContent }
        guard literal.body.count >= 2, literal.body.count >= 6 + Int(literal.body[1]) else { throw IntakeKeyError.malformedMessage }
        return Array(literal.body[(6 + Int(literal.body[1]))...])
    }

    private static let aesKeyLengths: [UInt8: Int] = [7: 16, 8: 24, 9: 32]

    /// An OpenPGP multiprecision integer: bit count, then big-endian bytes without leading zeros.
    private static func mpi(_ bytes: [UInt8]) -> [UInt8] {
        let trimmed = bytes.drop { $0 == 0 }
        let bits = trimmed.first.map { (trimmed.count - 1) * 8 + (8 - $0.leadingZeroBitCount) } ?? 0
        return [UInt8(truncatingIfNeeded: bits >> 8), UInt8(truncatingIfNeeded: bits)] + trimmed
    }
}

/// Why an intake key could not be read or a message could not be opened; never carries key material or plaintext.
public struct IntakeKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    private init(_ description: String) { self.description = description }

    /// The private key could not be read (not an RSA key of at least 2048 bits in PEM) or generated.
    public static let invalidKey = IntakeKeyError("the intake key is not a usable RSA private key")
    /// The bytes are not one RSA session key packet followed by one integrity-protected data packet.
    public static let malformedMessage = IntakeKeyError("the message is not an OpenPGP message as pgp_pub_encrypt writes them")
    /// The message names another key; `IntakeKey.recipientID(of:)` tells which.
    public static let wrongRecipient = IntakeKeyError("the message is encrypted for another key")
    /// The session key or the data failed to decrypt or to pass the integrity check (one error, so it is no oracle).
    public static let decryptionFailed = IntakeKeyError("the message could not be decrypted or failed its integrity check")
    /// The authentic content is not exactly one uncompressed Literal Data packet (e.g. `compress-algo` was not 0).
    public static let unsupportedContent = IntakeKeyError("the message does not hold exactly one uncompressed literal data packet")
}

/// The outer structure of a `pgp_pub_encrypt` message: one PKESK (tag 1) then one SEIPD (tag 18), nothing else.
private struct Message {
    let keyID: [UInt8]
    let encryptedSessionKey: [UInt8]
    let encryptedData: [UInt8]

    init(_ bytes: [UInt8]) throws {
        var reader = PacketReader(bytes: bytes[...])
        let sessionKeyPacket = try reader.next()
        let dataPacket = try reader.next()
        let pkesk = sessionKeyPacket.body
        let seipd = dataPacket.body
        // PKESK v3: version, 8-byte key ID, algorithm (1 RSA or 2 RSA encrypt-only), one MPI.
        guard sessionKeyPacket.tag == 1, dataPacket.tag == 18, reader.isAtEnd, pkesk.count >= 12, pkesk[0] == 3,
            pkesk[9] == 1 || pkesk[9] == 2, pkesk.count == 12 + ((Int(pkesk[10]) << 8 | Int(pkesk[11])) + 7) / 8,
            seipd.first == 1
        else { throw IntakeKeyError.malformedMessage }
        keyID = Array(pkesk[1..<9])
        encryptedSessionKey = Array(pkesk[12...])
        encryptedData = Array(seipd.dropFirst())
    }
}

/// Reads OpenPGP packets with old- or new-format headers, joining new-format partial body lengths (RFC 4880 §4.2).
private struct PacketReader {
    let bytes: ArraySlice<UInt8>
    private var offset: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.offset = bytes.startIndex
    }

    var isAtEnd: Bool { offset == bytes.endIndex }

    mutating func next() throws -> (tag: UInt8, body: [UInt8]) {
        let header = try number(1)
        guard header & 0x80 != 0 else { throw IntakeKeyError.malformedMessage }
        if header & 0x40 == 0 {
            let tag = UInt8(header >> 2 & 0x0F)
            switch header & 3 {
            case 0: return (tag, try take(number(1)))
            case 1: return (tag, try take(number(2)))
            case 2: return (tag, try take(number(4)))
            default: return (tag, try take(bytes.endIndex - offset))  // indeterminate: to the end
            }
        }
        var body: [UInt8] = []
        while true {
            let first = try number(1)
            switch first {
            case 0..<192: return (UInt8(header & 0x3F), body + (try take(first)))
            case 192..<224: return (UInt8(header & 0x3F), body + (try take((first - 192) << 8 + number(1) + 192)))
            case 255: return (UInt8(header & 0x3F), body + (try take(number(4))))
            default: body += try take(1 << (first & 0x1F))  // partial: more chunks follow
            }
        }
    }

    private mutating func number(_ count: Int) throws -> Int {
        try take(count).reduce(0) { $0 << 8 | Int($1) }
    }

    private mutating func take(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= bytes.endIndex - offset else { throw IntakeKeyError.malformedMessage }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }
}
