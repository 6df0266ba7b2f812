import Foundation

/// Reads `Cache-Control` (RFC 9111) as far as key sets need it.
public enum CacheControl {
    /// `max-age` from a `Cache-Control` value; nil when absent or unreadable.
    public static func maxAge(_ value: String) -> Duration? {
        for directive in value.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Int64(parts[1]), seconds >= 0 {
                return .seconds(seconds)
            }
        }
        return nil
    }
}
