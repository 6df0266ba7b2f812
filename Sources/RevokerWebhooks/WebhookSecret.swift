import Crypto
import Foundation

/// A webhook endpoint's signing secret, written the Standard Webhooks way: `whsec_` and the
/// base64 of 24 to 64 random bytes. Its description never shows the key.
public struct WebhookSecret: Sendable, CustomStringConvertible {
    let key: SymmetricKey

    /// Reads `whsec_<base64>` (surrounding white space ignored); nil when it is not that.
    public init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(trimmed.dropFirst(6))), (24...64).contains(bytes.count)
        else { return nil }
        key = SymmetricKey(data: bytes)
    }

    /// A new random secret, as `revoker keygen --webhook` prints it.
    public static func generate() -> String {
        "whsec_" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, the `webhook-signature` value.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(id).\(timestamp).".utf8)
        message += body
        return "v1," + Data(HMAC<SHA256>.authenticationCode(for: message, using: key)).base64EncodedString()
    }

    public var description: String { "WebhookSecret(redacted)" }
}
