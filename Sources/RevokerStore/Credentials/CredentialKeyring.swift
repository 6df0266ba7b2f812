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
