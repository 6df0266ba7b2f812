/// Finds whether a text contains any of many secrets in one pass per secret length (Rabin-Karp
/// over bytes), so that a test holding thousands of tokens can search megabytes of logs and
/// answers for all of them; searching for each secret in turn grew with their product.
public struct SecretScanner: Sendable {
    /// The secrets by length, each by its rolling hash.
    private let byLength: [Int: [UInt64: [[UInt8]]]]

    public init(_ secrets: some Sequence<String>) {
        var byLength: [Int: [UInt64: [[UInt8]]]] = [:]
        for secret in secrets where !secret.isEmpty {
            let bytes = Array(secret.utf8)
            byLength[bytes.count, default: [:]][Self.hash(bytes[...]), default: []].append(bytes)
        }
        self.byLength = byLength
    }

    private static let base: UInt64 = 1_099_511_628_211

    private static func hash(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 &* base &+ UInt64($1) }
    }

    /// Whether `text` contains any of the secrets.
    public func foundAny(in text: some StringProtocol) -> Bool {
        let bytes = Array(text.utf8)
        for (length, secrets) in byLength where length <= bytes.count {
            // base^(length-1), to take the leaving byte out of the window's hash.
            var leading: UInt64 = 1
            for _ in 1..<length { leading = leading &* Self.base }
            var window = Self.hash(bytes[0..<length])
            var start = 0
            while true {
                if let candidates = secrets[window],
                    candidates.contains(where: { $0.elementsEqual(bytes[start..<(start + length)]) })
                {
                    return true
                }
                let end = start + length
                guard end < bytes.count else { break }
                window = (window &- UInt64(bytes[start]) &* leading) &* Self.base &+ UInt64(bytes[end])
                start += 1
            }
        }
        return false
    }
}
