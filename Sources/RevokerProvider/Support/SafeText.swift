import Foundation

/// Makes text that came from the network safe to log, store and show.
public enum SafeText {
    public static let maximumDescriptionLength = 256

    /// OAuth error codes are short snake_case words; anything else is not trusted as one.
    public static func errorCode(_ raw: String) -> String? {
        guard !raw.isEmpty, raw.utf8.count <= 64,
            raw.utf8.allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        return raw
    }

    /// An error as a log line or a message tells it: its description, cut at `limit` characters
    /// (a driver's error can carry a whole statement).
    public static func describing(_ error: any Error, limit: Int = 200) -> String {
        String(String(describing: error).prefix(limit))
    }

    /// Strips control characters, removes any value we sent, and bounds the length.
    public static func bounded(_ raw: String, scrubbing secrets: [String]) -> String {
        var text = String(String.UnicodeScalarView(raw.unicodeScalars.filter { !$0.properties.generalCategory.isControl }))
        for secret in secrets where secret.count >= 4 {
            text = text.replacingOccurrences(of: secret, with: "[redacted]")
        }
        if text.count > maximumDescriptionLength {
            text = String(text.prefix(maximumDescriptionLength)) + "…"
        }
        return text
    }
}

extension Unicode.GeneralCategory {
    fileprivate var isControl: Bool {
        switch self {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse: true
        default: false
        }
    }
}
