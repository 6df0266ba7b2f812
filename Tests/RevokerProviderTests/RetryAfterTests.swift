import Foundation
import RevokerProvider
import Testing

@Suite("Retry-After")
struct RetryAfterTests {
    @Test func secondsOrAnHTTPDateAndAtMostADay() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let header = formatter.string(from: now.addingTimeInterval(120))
        #expect(RetryAfter.parse(header, now: now) == .seconds(120))
        #expect(RetryAfter.parse(" 17 ", now: now) == .seconds(17))
        #expect(RetryAfter.parse("soon", now: now) == nil)
        #expect(RetryAfter.parse("-5", now: now) == nil)
        #expect(RetryAfter.parse("999999999", now: now) == RetryAfter.maximum)
        #expect(RetryAfter.parse(formatter.string(from: now.addingTimeInterval(-60)), now: now) == .zero, "a date past is no pause")
    }
}
