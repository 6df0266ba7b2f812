import Foundation
import Testing

@testable import RevokerEvidence

@Suite("Wire format: times and JSON text every surface writes")
struct WireFormatTests {
    @Test("timestamps keep microseconds, fixed width, so that they sort as text")
    func timestamps() {
        #expect(WireFormat.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000000Z")
        #expect(WireFormat.timestamp(Date(timeIntervalSince1970: 1_800_000_000.000001)) == "2027-01-15T08:00:00.000001Z")
        #expect(WireFormat.timestamp(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500000Z")
        #expect(WireFormat.timestamp(micros: 951_782_400_000_000) == "2000-02-29T00:00:00.000000Z")
        #expect(WireFormat.timestamp(micros: 4_107_542_399_999_999) == "2100-02-28T23:59:59.999999Z")
        #expect(WireFormat.timestamp(micros: 4_107_542_400_000_000) == "2100-03-01T00:00:00.000000Z")
        #expect(WireFormat.timestamp(micros: -1) == "1969-12-31T23:59:59.999999Z")
    }

    @Test("every date agrees with Foundation's Gregorian calendar in UTC")
    func agreesWithTheCalendar() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        var generator = SystemRandomNumberGenerator()
        // From 1900 to 2400: leap centuries, 400-year cycles and the days around each year's end.
        let seconds =
            (0..<5_000).map { _ in Int64.random(in: -2_208_988_800...13_569_465_600, using: &generator) }
            + (1900...2400).flatMap { year -> [Int64] in
                let newYear = calendar.date(from: DateComponents(year: year, month: 1, day: 1)).map { Int64($0.timeIntervalSince1970) } ?? 0
                return [newYear - 1, newYear, newYear + 59 * 86_400]
            }
        for second in seconds {
            let fraction = Int64.random(in: 0..<1_000_000, using: &generator)
            let micros = second * 1_000_000 + fraction
            let parts = calendar.dateComponents(
                [.year, .month, .day, .hour, .minute, .second],
                from: Date(timeIntervalSince1970: TimeInterval(second))
            )
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
                parts.year ?? 0,
                parts.month ?? 0,
                parts.day ?? 0,
                parts.hour ?? 0,
                parts.minute ?? 0,
                parts.second ?? 0,
                Int(fraction)
            )
            #expect(WireFormat.timestamp(micros: micros) == expected)
        }
    }

    @Test("JSON strings escape quotes, backslashes, controls and the line separators, and parse back")
    func jsonStrings() throws {
        let value = "a \"quoted\" \\ path\n\r\t\u{0}\u{1B}[2J\u{7F}\u{85}\u{2028}\u{2029} é 🙂"
        let text = WireFormat.jsonString(value)
        #expect(text == #""a \"quoted\" \\ path\n\r\t\u0000\u001b[2J\u007f\u0085\u2028\u2029 é 🙂""#)
        let parsed = try JSONDecoder().decode(String.self, from: Data(text.utf8))
        #expect(parsed == value)
    }

    @Test("JSON objects keep their members' order")
    func jsonObjects() throws {
        let text = WireFormat.jsonObject([("z", "1"), ("a", WireFormat.jsonString("x")), ("m", "null")])
        #expect(text == #"{"z":1,"a":"x","m":null}"#)
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        #expect(parsed?.count == 3)
    }
}
