/// `application/x-www-form-urlencoded` encoding as the providers' token endpoints expect it.
///
/// Hand-written because the body carries secrets: nothing here logs or keeps them.
public enum FormEncoding {
    /// The media type of form bodies.
    public static let contentType = "application/x-www-form-urlencoded"

    /// Encodes ordered pairs; every byte outside RFC 3986's unreserved set is percent-encoded.
    public static func encode(_ fields: [(String, String)]) -> String {
        String(decoding: encodedBytes(fields), as: UTF8.self)
    }

    /// ``encode(_:)`` as bytes, for a request body.
    public static func encodedBytes(_ fields: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 } + 64)
        for (index, (name, value)) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            percentEncode(name, into: &out)
            out.append(UInt8(ascii: "="))
            percentEncode(value, into: &out)
        }
        return out
    }

    /// Decodes a form body or query string. Returns `nil` when a percent escape is
    /// malformed or the result is not UTF-8. Repeated names keep their first value.
    public static func decode(_ body: String) -> [String: String]? {
        var result: [String: String] = [:]
        for pair in body.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let separator = pair.firstIndex(of: UInt8(ascii: "="))
            guard let name = percentDecode(pair[..<(separator ?? pair.endIndex)]) else { return nil }
            guard let value = separator.map({ percentDecode(pair[pair.index(after: $0)...]) }) ?? "" else { return nil }
            if result[name] == nil { result[name] = value }
        }
        return result
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func percentEncode(_ string: String, into out: inout [UInt8]) {
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            }
        }
    }

    private static func percentDecode(_ text: Substring.UTF8View.SubSequence) -> String? {
        // Most names and values (tokens, JWTs) need no decoding: take them as they are.
        if !text.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) {
            return String(Substring(text))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var iterator = text.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - 48
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - 87
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - 55
        default: nil
        }
    }
}
