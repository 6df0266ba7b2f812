import Foundation

/// How Revoker writes times and strings wherever it answers in text: the HTTP API, events and
/// webhooks, exports, receipts and the command line. One place, so that every surface agrees to
/// the microsecond and escapes the same characters.
public enum WireFormat {
    /// RFC 3339 in UTC with microseconds, e.g. `2026-11-22T08:38:53.123456Z`: the database's
    /// precision, fixed width, so that times sort as text and exported rows keep their order.
    public static func timestamp(_ date: Date) -> String {
        timestamp(micros: Int64((date.timeIntervalSince1970 * 1_000_000).rounded()))
    }

    /// RFC 3339 in UTC with microseconds, from microseconds since 1970.
    public static func timestamp(micros: Int64) -> String {
        let (seconds, fraction) = floorDivision(micros, 1_000_000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilDate(daysSince1970: days)
        return "\(digits(year, 4))-\(digits(month, 2))-\(digits(day, 2))T"
            + "\(digits(secondOfDay / 3_600, 2)):\(digits(secondOfDay / 60 % 60, 2)):\(digits(secondOfDay % 60, 2))"
            + ".\(digits(fraction, 6))Z"
    }

    /// A JSON string literal, escaping quotes, backslashes, every control character and the two
    /// line separators JavaScript reads as line ends.
    public static func jsonString(_ value: String) -> String {
        var text = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _
            where scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                text += "\\u" + digits(Int64(scalar.value), 4, radix: 16)
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }

    /// A JSON object whose members keep the given order; each value is already JSON text.
    public static func jsonObject(_ members: [(String, String)]) -> String {
        "{" + members.map { "\(jsonString($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    /// Days since 1970-01-01 as a proleptic Gregorian date (Howard Hinnant's `civil_from_days`),
    /// without a calendar or a time zone to consult.
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = floorDivision(shifted, 146_097).quotient
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func digits(_ value: Int64, _ width: Int, radix: Int = 10) -> String {
        let text = String(value, radix: radix)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
