import Crypto
import Foundation

/// A provider's credential (authorization code or token). Its descriptions redact the secret.
public struct Credential: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of credential.
    public var kind: CredentialKind
    /// The secret itself. Never log it.
    public var secret: String

    /// Creates a credential.
    public init(kind: CredentialKind, secret: String) {
        self.kind = kind
        self.secret = secret
    }

    /// sha256 of the secret's UTF-8 bytes, the same value `revoker.enqueue_revocation` computes.
    public var digest: [UInt8] {
        Array(SHA256.hash(data: Array(self.secret.utf8)))
    }

    public var description: String { "Credential(kind: \(self.kind), secret: <redacted>)" }
    public var debugDescription: String { self.description }
}
