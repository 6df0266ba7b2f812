import Foundation

/// A receipt file: canonical JSON (sorted keys, a final newline) signed as a whole with the
/// audit key, so that any changed byte, reformatting or extension shows.
public protocol SignedEvidenceFile: Encodable {
    var format: String { get }
    var keyID: String { get }
    var signature: String { get set }
}

extension SignedEvidenceFile {
    /// The file's bytes: canonical JSON and a final newline.
    public func canonicalBytes() throws -> Data {
        try AuditReceipt.encoder().encode(self) + Data("\n".utf8)
    }

    /// What the signature covers: the file with an empty signature.
    func signedBytes() throws -> [UInt8] {
        var unsigned = self
        unsigned.signature = ""
        return Array(try unsigned.canonicalBytes())
    }

    /// Signs the file with `key`.
    mutating func sign(with key: AuditSigningKey) throws {
        signature = Data(try key.sign(try signedBytes())).base64EncodedString()
    }

    /// What is wrong with the file as a whole: an unknown format, bytes that are not the
    /// canonical ones it was read from, a signature that is not `keys`'.
    func envelopeProblems(_ bytes: Data, format expected: String, keys: [AuditPublicKey]) -> [String] {
        var problems: [String] = []
        if format != expected { problems.append("unknown format '\(format.prefix(60))'") }
        if (try? canonicalBytes()) != bytes {
            problems.append("the file is not byte for byte as issued (changed, reformatted or extended)")
        }
        if let key = keys.first(where: { $0.keyID == keyID }) {
            let signature = Data(base64Encoded: signature).map(Array.init) ?? []
            if (try? signedBytes()).map({ key.isValid(signature: signature, for: $0) }) != true {
                problems.append("the receipt's signature does not match its content")
            }
        } else {
            problems.append("the receipt is signed by key \(keyID.prefix(16)), which was not given")
        }
        return problems
    }
}
