import Crypto
import Foundation

/// AES-256 keys for sealing credentials, by key id; one of them is current (used to seal),
/// all of them open. Rotate by adding a new key and making it current; keep old keys until
/// no live row is sealed with them.
public struct CredentialKeyring: Sendable, CustomStringConvertible {
    /// The key id new credentials are sealed with.
    public let currentKeyID: String
    let keys: [String: SymmetricKey]

    /// Key ids in the keyring.
    public var keyIDs: [String] { self.keys.keys.sorted() }

    /// Creates a keyring from raw 256-bit keys.
    public init(keys: [String: SymmetricKey], currentKeyID: String) throws(RevokerStoreError) {
        for (id, key) in keys {
            try Self.validate(keyID: id)
            guard key.bitCount == 256 else {
                throw RevokerStoreError(.invalidKeyring, "key '\(id)' is not 256 bits long")
            }
        }
        guard keys[currentKeyID] != nil else {
            throw RevokerStoreError(.invalidKeyring, "the current key id '\(Self.printable(currentKeyID))' is not in the keyring")
        }
        self.keys = keys
        self.currentKeyID = currentKeyID
    }

    /// Parses entries `keyID=base64key`, separated by commas, semicolons, whitespace or
    /// newlines (as found in an environment variable or a file). Each key must decode to 32
    /// bytes. `currentKeyID` defaults to the last entry.
    public init(parsing text: String, currentKeyID: String? = nil) throws(RevokerStoreError) {
        var keys: [String: SymmetricKey] = [:]
        var last: String?
        let separators = CharacterSet(charactersIn: ",;").union(.whitespacesAndNewlines)
        let entries = text.components(separatedBy: separators).filter { !$0.isEmpty }
        for (index, entry) in entries.enumerated() {
            guard let equals = entry.firstIndex(of: "=") else {
                throw RevokerStoreError(.invalidKeyring, "keyring entry \(index + 1) is not of the form keyID=base64key")
            }
            let id = String(entry[..<equals])
            let material = String(entry[entry.index(after: equals)...])
            try Self.validate(keyID: id)
            guard keys[id] == nil else {
                throw RevokerStoreError(.invalidKeyring, "key id '\(id)' appears more than once")
            }
            guard let bytes = Data(base64Encoded: material) else {
                throw RevokerStoreError(.invalidKeyring, "key '\(id)' is not valid base64")
            }
            guard bytes.count == 32 else {
                throw RevokerStoreError(.invalidKeyring, "key '\(id)' must be 32 bytes (256 bits), found \(bytes.count)")
            }
            keys[id] = SymmetricKey(data: bytes)
            last = id
        }
        guard let current = currentKeyID ?? last else {
            throw RevokerStoreError(.invalidKeyring, "the keyring is empty")
        }
        try self.init(keys: keys, currentKeyID: current)
    }

    /// Generates a random key and returns it as a `keyID=base64key` entry.
    public static func generateEntry(keyID: String) throws(RevokerStoreError) -> String {
        try validate(keyID: keyID)
        let key = SymmetricKey(size: .bits256)
        let base64 = key.withUnsafeBytes { Data($0).base64EncodedString() }
        return "\(keyID)=\(base64)"
    }

    public var description: String {
        "CredentialKeyring(current: \(self.currentKeyID), keys: \(self.keyIDs))"
    }

    static func validate(keyID: String) throws(RevokerStoreError) {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard (1...64).contains(keyID.count), keyID.unicodeScalars.allSatisfy({ allowed.contains($0) }) else {
            throw RevokerStoreError(.invalidKeyring, "key ids are 1-64 characters of A-Z, a-z, 0-9, '.', '_' or '-' (got '\(printable(keyID))')")
        }
    }

    static func printable(_ value: String) -> String {
        String(value.prefix(64).map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "?" })
    }
}

/// A credential sealed with AES-GCM, as stored in `sealed_credential` + `credential_key_id`.
public struct SealedCredential: Sendable, Hashable, CustomStringConvertible {
    /// The key id that sealed it.
    public var keyID: String
    /// `version byte (1) || nonce (12) || ciphertext || tag (16)`.
    public var bytes: [UInt8]

    /// Creates a sealed credential from its stored parts.
    public init(keyID: String, bytes: [UInt8]) {
        self.keyID = keyID
        self.bytes = bytes
    }

    public var description: String { "SealedCredential(keyID: \(self.keyID), bytes: \(self.bytes.count))" }
}

/// Seals and opens credentials with AES-256-GCM.
///
/// The additional authenticated data binds a sealed value to its request id and credential
/// kind, so it cannot be copied onto another row or relabelled as another kind.
public struct CredentialSealer: Sendable {
    static let formatVersion: UInt8 = 1

    /// The keyring used.
    public let keyring: CredentialKeyring

    /// Creates a sealer.
    public init(keyring: CredentialKeyring) {
        self.keyring = keyring
    }

    /// Seals `credential` for request `requestID` with the current key.
    public func seal(_ credential: Credential, requestID: UUID) throws(RevokerStoreError) -> SealedCredential {
        let keyID = self.keyring.currentKeyID
        guard let key = self.keyring.keys[keyID] else {
            throw RevokerStoreError(.unknownKeyID, "the current key id is not in the keyring")
        }
        do {
            let box = try AES.GCM.seal(
                Array(credential.secret.utf8),
                using: key,
                authenticating: Self.aad(requestID: requestID, kind: credential.kind, keyID: keyID)
            )
            guard let combined = box.combined else {
                throw RevokerStoreError(.sealFailed, "AES-GCM produced no combined representation")
            }
            return SealedCredential(keyID: keyID, bytes: [Self.formatVersion] + Array(combined))
        } catch let error as RevokerStoreError {
            throw error
        } catch {
            throw RevokerStoreError(.sealFailed, "the credential could not be sealed")
        }
    }

    /// Opens a sealed credential of request `requestID` and the given kind.
    public func open(_ sealed: SealedCredential, requestID: UUID, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        guard let key = self.keyring.keys[sealed.keyID] else {
            throw RevokerStoreError(
                .unknownKeyID,
                "the credential is sealed with key id '\(CredentialKeyring.printable(sealed.keyID))', which the keyring does not hold"
            )
        }
        guard sealed.bytes.count > 1 + 12 + 16, sealed.bytes[0] == Self.formatVersion else {
            throw RevokerStoreError(.unsealFailed, "the sealed credential has an unknown format")
        }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.bytes.dropFirst())
            let plain = try AES.GCM.open(
                box,
                using: key,
                authenticating: Self.aad(requestID: requestID, kind: kind, keyID: sealed.keyID)
            )
            guard let secret = String(bytes: plain, encoding: .utf8) else {
                throw RevokerStoreError(.unsealFailed, "the opened credential is not UTF-8")
            }
            return Credential(kind: kind, secret: secret)
        } catch let error as RevokerStoreError {
            throw error
        } catch {
            throw RevokerStoreError(
                .unsealFailed,
                "the sealed credential could not be opened: wrong key, tampered ciphertext, or sealed for another request"
            )
        }
    }

    static func aad(requestID: UUID, kind: CredentialKind, keyID: String) -> [UInt8] {
        Array("revoker.credential.v1|\(requestID.uuidString.lowercased())|\(kind.rawValue)|\(keyID)".utf8)
    }
}
