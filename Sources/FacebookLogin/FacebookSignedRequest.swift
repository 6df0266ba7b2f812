import Crypto
import Foundation
import RevokerProvider

/// A `signed_request` as Facebook sends it to an app's Data Deletion Request and Deauthorize
/// callbacks: `base64url(signature).base64url(payload)`, the signature an HMAC-SHA256 of the
/// encoded payload keyed with the app secret, the payload a JSON object naming the user.
public struct FacebookSignedRequest: Sendable, Equatable {
    /// The app-scoped id of the person it is about.
    public let userID: String
    /// `issued_at`.
    public let issuedAt: Date
    /// `expires`, when the payload carries it.
    public let expires: Date?
    /// The SHA-256 of the whole `signed_request`, hex: the same request sent again has the same
    /// digest, so that a replay is recognised.
    public let digest: String

    /// The longest `signed_request` read.
    public static let maximumLength = 8192
    /// The one algorithm accepted.
    public static let algorithm = "HMAC-SHA256"

    /// Verifies `text` completely with the app's `secret`: two base64url parts in their canonical
    /// form (padded or not), a 32-byte signature that matches (compared in constant time) before the
    /// payload is read, `algorithm` HMAC-SHA256, a user id of digits, and `issued_at` no older
    /// than `maximumAge` and no further in the future than `leeway`.
    public static func verify(
        _ text: String,
        secret: FacebookAppSecret,
        now: Date = Date(),
        maximumAge: Duration = .seconds(86_400),
        leeway: Duration = .seconds(300)
    ) throws(FacebookLoginError) -> FacebookSignedRequest {
        let noun = "The signed_request"
        guard text.utf8.count <= maximumLength else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun) is longer than \(maximumLength) bytes.")
        }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun) is not two base64url parts joined by one period.")
        }
        guard let signature = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]) else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun) is not base64url in its canonical form, or its padding is wrong.")
        }
        guard signature.count == SHA256.byteCount else {
            throw FacebookLoginError(.invalidSignature, "\(noun)'s signature is not an HMAC-SHA256.")
        }
        // The signature covers the payload as encoded, and is checked before the payload is read.
        let key = SymmetricKey(data: Array(secret.value.utf8))
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Array(parts[1]), using: key) else {
            throw FacebookLoginError(.invalidSignature, "\(noun)'s signature does not verify with the app's secret.")
        }
        guard case .object(let object)? = try? StrictJSON.parse(payload) else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s payload is not a strict JSON object.")
        }
        guard case .string(let algorithm) = object["algorithm"] else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s payload names no algorithm.")
        }
        guard algorithm == Self.algorithm else {
            throw FacebookLoginError(.unsupportedAlgorithm, "\(noun) names the algorithm '\(algorithm.prefix(40))', not \(Self.algorithm).")
        }
        guard let issuedAt = seconds(object["issued_at"]) else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s payload has no issued_at in seconds.")
        }
        let age = now.timeIntervalSince(issuedAt)
        guard age <= maximumAge.timeInterval else {
            throw FacebookLoginError(.staleSignedRequest, "\(noun) was issued at \(issuedAt), longer ago than \(Int(maximumAge.timeInterval)) s.")
        }
        guard -age <= leeway.timeInterval else {
            throw FacebookLoginError(.staleSignedRequest, "\(noun) was issued in the future (\(issuedAt)).")
        }
        // Facebook sends the id as a string; a number is read too, never rounded.
        let userID: String
        switch object["user_id"] {
        case .string(let text), .number(let text): userID = text
        default: throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s payload names no user_id.")
        }
        guard (1...64).contains(userID.utf8.count), userID.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s user_id is not an app-scoped user id (digits).")
        }
        let expires: Date?
        switch object["expires"] {
        case nil, .null: expires = nil
        case let value:
            guard let seconds = seconds(value) else {
                throw FacebookLoginError(.malformedSignedRequest, "\(noun)'s expires is not a time in seconds.")
            }
            // 0: a token that does not expire.
            expires = seconds.timeIntervalSince1970 == 0 ? nil : seconds
        }
        let digest = SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
        return FacebookSignedRequest(userID: userID, issuedAt: issuedAt, expires: expires, digest: digest)
    }

    /// A whole number of seconds since 1970, as a JSON number.
    private static func seconds(_ value: JSONValue?) -> Date? {
        guard case .number(let text) = value, let seconds = Int64(text), seconds >= 0 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}

/// Base64url (RFC 4648 §5) in its canonical form only: one encoding per value, so that a
/// signature cannot be bent into another spelling that decodes the same. Padding is optional
/// (Facebook's callers disagree on it), but when present it must be exactly what the length needs.
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ padded: some Collection<UInt8>) -> [UInt8]? {
        var text = Array(padded)
        if text.last == UInt8(ascii: "=") {
            guard text.count % 4 == 0 else { return nil }
            text.removeLast()
            if text.last == UInt8(ascii: "=") { text.removeLast() }
            // Padding stands for one or two missing characters, never a whole group or more.
            guard text.count % 4 >= 2 else { return nil }
        }
        guard !text.isEmpty, text.count % 4 != 1 else { return nil }
        var values: [UInt8] = []
        values.reserveCapacity(text.count)
        for byte in text {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(values.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // The bits left over must be zero: otherwise two spellings decode to the same bytes.
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return bytes
    }
}
