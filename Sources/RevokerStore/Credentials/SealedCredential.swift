import Crypto
import Foundation

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
