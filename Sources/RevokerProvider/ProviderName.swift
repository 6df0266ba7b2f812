/// A sign-in provider's name as requests, the store, the API and the configuration spell it:
/// a lowercase word (`apple`, `google`).
public struct ProviderName: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Accepts 1 to 32 characters of `a-z`, `0-9` and `_`, starting with a letter.
    public init?(rawValue: String) {
        let bytes = Array(rawValue.utf8)
        guard (1...32).contains(bytes.count), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[0]),
            bytes.allSatisfy({
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || $0 == UInt8(ascii: "_")
            })
        else { return nil }
        self.rawValue = rawValue
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let name = ProviderName(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a provider name"))
        }
        self = name
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Sign in with Apple: the default for every request that names no provider.
    public static let apple = ProviderName(rawValue: "apple")!
    /// Sign in with Google.
    public static let google = ProviderName(rawValue: "google")!
}
