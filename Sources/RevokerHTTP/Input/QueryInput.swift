import Foundation
import Hummingbird
import RevokerStore

/// Query parameters, read strictly: unknown or repeated parameters are refused.
struct QueryInput {
    let values: [String: String]

    init(_ request: Request, allowed: Set<String>) throws {
        var values: [String: String] = [:]
        for (name, value) in request.uri.queryParameters {
            let key = String(name)
            guard allowed.contains(key) else {
                throw APIProblem.badRequest(
                    "Unknown query parameter; known: \(allowed.sorted().joined(separator: ", ")).",
                    field: String(key.prefix(64))
                )
            }
            guard values[key] == nil else { throw APIProblem.badRequest("This parameter is given twice.", field: key) }
            values[key] = String(value)
        }
        self.values = values
    }

    /// A text parameter, checked as a submitted text field is (``NewRevocation/isVisibleText(_:)``);
    /// refused with 400, as every query parameter is.
    func string(_ name: String, length: ClosedRange<Int> = 1...255) throws -> String? {
        guard let value = values[name] else { return nil }
        guard length.contains(value.unicodeScalars.count) else {
            throw APIProblem.badRequest("This field must be \(length.lowerBound) to \(length.upperBound) characters long.", field: name)
        }
        guard NewRevocation.isVisibleText(value) else {
            throw APIProblem.badRequest(
                "This field must be visible text: no control, invisible or bidirectional characters, no leading or trailing white space.",
                field: name
            )
        }
        return value
    }

    func integer(_ name: String, range: ClosedRange<Int>) throws -> Int? {
        guard let value = values[name] else { return nil }
        guard let number = Int(value), range.contains(number) else {
            throw APIProblem.badRequest("This parameter must be an integer between \(range.lowerBound) and \(range.upperBound).", field: name)
        }
        return number
    }

    func uuid(_ name: String) throws -> UUID? {
        guard let value = values[name] else { return nil }
        guard let id = UUID(uuidString: value) else { throw APIProblem.badRequest("This parameter must be a UUID.", field: name) }
        return id
    }

    func date(_ name: String) throws -> Date? {
        guard let value = values[name] else { return nil }
        guard let date = Self.parseDate(value) else {
            throw APIProblem.badRequest("This parameter must be an RFC 3339 date-time, e.g. 2026-11-22T08:00:00Z.", field: name)
        }
        return date
    }

    /// An RFC 3339 `date-time` (section 5.6), all of it: any fraction of a second, a leap
    /// second, and any offset up to ±23:59, as the OpenAPI document promises.
    static func parseDate(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + digits] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += digits
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt"),
            let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2)
        else { return nil }
        var fraction = 0.0
        if expect(".") {
            var scale = 0.1
            let start = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        if !expect("Zz") {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") else { return nil }
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = number(2), expect(":"), let offsetMinutes = number(2), offsetHours <= 23, offsetMinutes <= 59 else {
                return nil
            }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
        }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard index == bytes.count, (1...12).contains(month), (1...daysInMonth[month - 1]).contains(day), hour <= 23, minute <= 59,
            second <= 60
        else { return nil }
        // Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}
