import Foundation

/// Parses `Retry-After` (RFC 9110): delay-seconds or an HTTP date.
public enum RetryAfter {
    /// Longer requests are capped: a day is already a very long pause for a deletion.
    public static let maximum: Duration = .seconds(86_400)

    /// The delay the header asks for, or `nil` when it is neither form.
    public static func parse(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 {
            return min(.seconds(seconds), maximum)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        let seconds = max(0, date.timeIntervalSince(now).rounded(.up))
        return min(.seconds(Int64(seconds)), maximum)
    }
}
