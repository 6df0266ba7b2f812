import Crypto
import Foundation

/// An app's Sign in with Apple private key: the P-256 key Apple ships as `AuthKey_<KeyID>.p8`.
///
/// Loading diagnoses the mistakes people make with these files (escaped or lost line
/// breaks, a certificate or public key in its place, another curve) and names the source
/// in the message. The key itself never appears in a message or a description.
public struct AppleSigningKey: Sendable, CustomStringConvertible {
    let privateKey: P256.Signing.PrivateKey

    /// Wraps a key that is already in memory.
    public init(_ privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// Loads a `.p8` file.
    public static func load(contentsOfFile path: String) throws(AppleSignInError) -> AppleSigningKey {
        let source = "private key file '\(path)'"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AppleSignInError(.keyFileNotFound, "The \(source) does not exist.")
        }
        guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
            throw AppleSignInError(.keyFileUnreadable, "The \(source) cannot be read (is it a readable file?).")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw AppleSignInError(.malformedKey, "The \(source) is not PEM text; expected the AuthKey_<KeyID>.p8 file from Apple.")
        }
        return try AppleSigningKey(pem: text, source: source)
    }

    /// Parses PEM text; `source` says where it came from (a file, an environment variable) for messages.
    public init(pem text: String, source: String) throws(AppleSignInError) {
        let pem = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if pem.contains("\\n") {
            throw AppleSignInError(
                .malformedKey,
                "The \(source) contains literal \\n escapes instead of line breaks; store the PEM with real line breaks."
            )
        }
        guard let label = Self.pemLabel(of: pem) else {
            throw AppleSignInError(
                .malformedKey,
                "The \(source) is not PEM: there is no '-----BEGIN PRIVATE KEY-----' line; expected the AuthKey_<KeyID>.p8 file from Apple."
            )
        }
        switch label {
        case "PRIVATE KEY", "EC PRIVATE KEY":
            break
        case "CERTIFICATE":
            throw AppleSignInError(.wrongKeyType, "The \(source) holds a certificate, not a private key; use the AuthKey_<KeyID>.p8 file from Apple.")
        case "PUBLIC KEY", "EC PUBLIC KEY", "RSA PUBLIC KEY":
            throw AppleSignInError(.wrongKeyType, "The \(source) holds a public key, not a private key; use the AuthKey_<KeyID>.p8 file from Apple.")
        case "RSA PRIVATE KEY":
            throw AppleSignInError(.wrongKeyType, "The \(source) holds an RSA key; Sign in with Apple keys are EC P-256.")
        case "ENCRYPTED PRIVATE KEY":
            throw AppleSignInError(.wrongKeyType, "The \(source) holds an encrypted private key; Apple's .p8 files are not encrypted.")
        default:
            throw AppleSignInError(.wrongKeyType, "The \(source) holds a '\(label.prefix(40))' block, not a private key.")
        }
        let lines = pem.split(whereSeparator: \.isNewline)
        if lines.count < 3 || lines.contains(where: { $0.count > 80 }) {
            throw AppleSignInError(
                .malformedKey,
                "The \(source) has lost its line breaks; the BEGIN and END lines and the base64 body must be on separate lines."
            )
        }
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            self.privateKey = key
            return
        }
        if (try? P384.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleSignInError(.wrongKeyType, "The \(source) holds a P-384 key; Sign in with Apple keys are P-256.")
        }
        if (try? P521.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw AppleSignInError(.wrongKeyType, "The \(source) holds a P-521 key; Sign in with Apple keys are P-256.")
        }
        if Self.derOfFirstBlock(in: lines).map(Self.containsRSAIdentifier) == true {
            throw AppleSignInError(.wrongKeyType, "The \(source) holds an RSA key; Sign in with Apple keys are EC P-256.")
        }
        throw AppleSignInError(.malformedKey, "The \(source) could not be decoded as a PKCS#8 P-256 private key (damaged base64 or wrong content).")
    }

    /// The public half, PEM-encoded (what Apple keeps, and what the sandbox registers).
    public var publicKeyPEM: String { privateKey.publicKey.pemRepresentation }

    public var description: String { "AppleSigningKey(P-256, redacted)" }

    private static func pemLabel(of pem: String) -> String? {
        guard let begin = pem.range(of: "-----BEGIN ") else { return nil }
        guard let end = pem.range(of: "-----", range: begin.upperBound..<pem.endIndex) else { return nil }
        return String(pem[begin.upperBound..<end.lowerBound])
    }

    private static func derOfFirstBlock(in lines: [Substring]) -> Data? {
        let body = lines.drop { !$0.hasPrefix("-----BEGIN") }.dropFirst().prefix { !$0.hasPrefix("-----END") }
        return Data(base64Encoded: body.joined())
    }

    /// rsaEncryption, 1.2.840.113549.1.1.1, as it appears in a PKCS#8 AlgorithmIdentifier.
    private static func containsRSAIdentifier(_ der: Data) -> Bool {
        let oid: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
        return der.firstRange(of: oid) != nil
    }
}
