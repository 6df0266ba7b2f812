/// Text made safe inside HTML elements and quoted attributes.
public enum HTMLEscaping {
    /// Escapes `& < > " ' \``, one Unicode scalar at a time: a quote followed by a combining
    /// mark is one Swift `Character` that is not a quote, and must still be escaped.
    public static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            case "`": escaped += "&#96;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
