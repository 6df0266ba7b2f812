/// A JSON value read by ``StrictJSON``.
public enum JSONValue: Equatable, Sendable {
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    /// A number, as written (so an integer is told from a fraction without rounding).
    case number(String)
    case bool(Bool)
    case null
}

/// RFC 8259 JSON and nothing more: no trailing commas, comments or single quotes, no
/// duplicate keys (two values for one field would let two readers disagree), no unpaired
/// surrogates, no content after the value, at most 32 levels deep.
public struct StrictJSON {
    /// Why the input is not strict JSON.
    public struct Invalid: Error, Sendable {
        /// What is wrong, without the input.
        public let reason: String
    }

    private let bytes: [UInt8]
    private var index = 0

    /// The one JSON value `bytes` hold.
    public static func parse(_ bytes: [UInt8]) throws(Invalid) -> JSONValue {
        var parser = StrictJSON(bytes: bytes)
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw Invalid(reason: "there is more after the JSON value") }
        return value
    }

    /// The JSON object a request body holds; `Invalid` says, in a sentence about "the body",
    /// why it is not one (never repeating the input).
    public static func object(_ bytes: [UInt8]) throws(Invalid) -> [String: JSONValue] {
        guard String(validating: bytes, as: UTF8.self) != nil else { throw Invalid(reason: "The body is not valid UTF-8.") }
        let parsed: JSONValue
        do {
            parsed = try parse(bytes)
        } catch {
            throw Invalid(reason: "The body is not well-formed JSON: \(error.reason).")
        }
        guard case .object(let object) = parsed else { throw Invalid(reason: "The body must be a JSON object.") }
        return object
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private mutating func expect(_ byte: UInt8, _ reason: String) throws(Invalid) {
        guard current == byte else { throw Invalid(reason: reason) }
        index += 1
    }

    private mutating func value(depth: Int) throws(Invalid) -> JSONValue {
        guard depth < 32 else { throw Invalid(reason: "it is nested too deeply") }
        skipWhitespace()
        switch current {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case .some(let byte) where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): return try number()
        case nil: throw Invalid(reason: "it ends where a value was expected")
        default: throw Invalid(reason: "a value is malformed")
        }
    }

    private mutating func object(depth: Int) throws(Invalid) -> JSONValue {
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw Invalid(reason: "an object key is not a string (or a comma trails)") }
            let key = try string()
            guard members[key] == nil else { throw Invalid(reason: "an object has the same key twice") }
            skipWhitespace()
            try expect(UInt8(ascii: ":"), "a colon is missing after an object key")
            members[key] = try value(depth: depth + 1)
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "}"), "an object is not closed")
            return .object(members)
        }
    }

    private mutating func array(depth: Int) throws(Invalid) -> JSONValue {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            guard current != UInt8(ascii: "]") else { throw Invalid(reason: "a comma trails in an array") }
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                index += 1
                continue
            }
            try expect(UInt8(ascii: "]"), "an array is not closed")
            return .array(elements)
        }
    }

    private mutating func literal(_ word: String, _ value: JSONValue) throws(Invalid) -> JSONValue {
        for byte in word.utf8 { try expect(byte, "a value is malformed") }
        return value
    }

    private mutating func number() throws(Invalid) -> JSONValue {
        let start = index
        func digits(_ parser: inout StrictJSON) -> Int {
            let first = parser.index
            while let byte = parser.current, (0x30...0x39).contains(byte) { parser.index += 1 }
            return parser.index - first
        }
        if current == UInt8(ascii: "-") { index += 1 }
        if current == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits(&self) > 0 else { throw Invalid(reason: "a number is malformed") }
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw Invalid(reason: "a number is malformed") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw Invalid(reason: "a number is malformed") }
        }
        return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }

    private mutating func string() throws(Invalid) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run = index  // start of the unescaped bytes not yet copied
        func flush(_ parser: StrictJSON, upTo end: Int) {
            scalars.append(contentsOf: String(decoding: parser.bytes[run..<end], as: UTF8.self).unicodeScalars)
        }
        while true {
            guard let byte = current else { throw Invalid(reason: "a string is not closed") }
            switch byte {
            case UInt8(ascii: "\""):
                flush(self, upTo: index)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush(self, upTo: index)
                index += 1
                scalars.append(try escape())
                run = index
            case 0x00..<0x20:
                throw Invalid(reason: "a string holds a raw control character")
            default:
                index += 1
            }
        }
    }

    private mutating func escape() throws(Invalid) -> Unicode.Scalar {
        guard let byte = current else { throw Invalid(reason: "a string is not closed") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try hex4()
            if (0xD800...0xDBFF).contains(unit) {
                guard current == UInt8(ascii: "\\") else { throw Invalid(reason: "a string holds an unpaired surrogate") }
                index += 1
                try expect(UInt8(ascii: "u"), "a string holds an unpaired surrogate")
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw Invalid(reason: "a string holds an unpaired surrogate") }
                return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(unit) else { throw Invalid(reason: "a string holds an unpaired surrogate") }
            return scalar
        default:
            throw Invalid(reason: "a string holds an unknown escape")
        }
    }

    private mutating func hex4() throws(Invalid) -> UInt32 {
        guard index + 4 <= bytes.count else { throw Invalid(reason: "a \\u escape is cut short") }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw Invalid(reason: "a \\u escape is malformed")
            }
            value = value << 4 | UInt32(digit)
        }
        index += 4
        return value
    }
}
