import Foundation
import Testing

@testable import RevokerHTTP

/// Query parameters take every RFC 3339 date-time the OpenAPI document allows, and nothing else.
@Suite("RFC 3339 date-times in queries")
struct DateParsingTests {
    @Test(arguments: [
        ("2026-11-22T08:00:00Z", 1_795_334_400.0),
        ("2026-11-22t08:00:00z", 1_795_334_400.0),
        ("2026-11-22T08:00:00.5+01:30", 1_795_329_000.5),
        ("2026-11-22T08:00:00.000000000001Z", 1_795_334_400.0),
        ("2581-12-07T10:03:40-21:07", 19_310_857_840.0),
        ("2000-02-29T00:00:00Z", 951_782_400.0),
        ("0001-01-01T00:00:00Z", -62_135_596_800.0),
        ("2016-12-31T23:59:60Z", 1_483_228_800.0),
    ])
    func parses(_ text: String, _ expected: Double) throws {
        let date = try #require(QueryInput.parseDate(text), "\(text)")
        #expect(abs(date.timeIntervalSince1970 - expected) < 0.001, "\(text)")
    }

    @Test(arguments: [
        "", "2026-11-22", "2026-11-22T08:00:00", "2026-11-22 08:00:00Z", "2026-11-22T08:00Z", "2001-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T08:60:00Z", "2026-11-22T08:00:61Z",
        "2026-11-22T08:00:00+24:00", "2026-11-22T08:00:00+01:60", "2026-11-22T08:00:00.Z", "2026-11-22T08:00:00Zjunk",
        "+2026-11-22T08:00:00Z", "２０２６-11-22T08:00:00Z",
    ])
    func refuses(_ text: String) {
        #expect(QueryInput.parseDate(text) == nil, "\(text)")
    }
}
