import Foundation
import Testing

@testable import RevokerStore

@Suite("Audit export renderers")
struct AuditExportTests {
    static func record(detail: String? = nil, description: String? = nil) -> AuditRecord {
        AuditRecord(
            id: 42,
            occurredAt: Date(timeIntervalSince1970: 1_800_000_000.123456),
            requestID: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00CF4FC964FF"),
            clientID: "com.example.app",
            externalReference: "user-1",
            userID: nil,
            event: "apple_error",
            attempt: 2,
            actor: "worker-1",
            providerEndpoint: "/auth/token",
            httpStatus: 400,
            providerError: "invalid_grant",
            providerErrorDescription: description,
            latencyMilliseconds: 87,
            detail: detail
        )
    }

    @Test(
        "csv neutralises spreadsheet formulas",
        arguments: [
            ("=1+2", "'=1+2"), ("+SUM(A1)", "'+SUM(A1)"), ("-2+3", "'-2+3"), ("@cmd", "'@cmd"), ("\tx", "\\u0009x"),
            ("=A1,B2", "\"'=A1,B2\""), ("\r=x", "\\u000D=x"), (" =x", "' =x"), ("\u{FF1D}1+2", "'\u{FF1D}1+2"),
            ("\u{FF20}cmd", "'\u{FF20}cmd"), ("a=b", "a=b"), ("user-1", "user-1"), ("", ""),
        ]
    )
    func formulaNeutralisation(_ value: String, _ expected: String) {
        #expect(AuditExport.csvField(value) == expected)
    }

    @Test(
        "csv quotes per RFC 4180",
        arguments: [
            ("plain", "plain"), ("a,b", "\"a,b\""), ("say \"hi\"", "\"say \"\"hi\"\"\""), (" padded", "\" padded\""),
        ]
    )
    func quoting(_ value: String, _ expected: String) {
        #expect(AuditExport.csvField(value) == expected)
    }

    @Test(
        "csv shows control, invisible and separator characters as escapes",
        arguments: [
            ("two\nlines", "two\\u000Alines"), ("crlf\r\nx", "crlf\\u000D\\u000Ax"), ("\u{1B}[31mred", "\\u001B[31mred"),
            ("user\u{202E}kcatta", "user\\u202Ekcatta"), ("a\u{2028}b", "a\\u2028b"), ("zero\u{200B}width", "zero\\u200Bwidth"),
        ]
    )
    func controlCharacters(_ value: String, _ expected: String) {
        #expect(AuditExport.csvField(value) == expected)
    }

    @Test("csv has a header row, CRLF line ends and empty fields for missing values")
    func csvDocument() {
        let text = AuditExport.csv([Self.record(detail: "=cmd|' /C calc'!A0")])
        let lines = text.components(separatedBy: "\r\n")
        #expect(lines.count == 3)
        #expect(
            lines[0]
                == "id,occurred_at,request_id,client_id,external_reference,apple_user_id,event,attempt,actor,apple_endpoint,http_status,apple_error,apple_error_description,latency_ms,detail"
        )
        #expect(
            lines[1]
                == "42,2027-01-15T08:00:00.123456Z,6f9619ff-8b86-d011-b42d-00cf4fc964ff,com.example.app,user-1,,apple_error,2,worker-1,/auth/token,400,invalid_grant,,87,'=cmd|' /C calc'!A0"
        )
        #expect(lines[2].isEmpty)
    }

    @Test("json is an array of objects with snake_case keys, numbers, nulls and escaped text")
    func jsonDocument() throws {
        let text = AuditExport.json([Self.record(detail: "quote \" backslash \\ newline \n bell \u{7} end"), Self.record()])
        let array = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        #expect(array.count == 2)
        let first = try #require(array.first)
        #expect(Set(first.keys) == Set(AuditRecord.exportColumns))
        #expect(first["id"] as? Int == 42)
        #expect(first["http_status"] as? Int == 400)
        #expect(first["latency_ms"] as? Int == 87)
        #expect(first["apple_user_id"] is NSNull)
        #expect(first["occurred_at"] as? String == "2027-01-15T08:00:00.123456Z")
        #expect(first["detail"] as? String == "quote \" backslash \\ newline \n bell \u{7} end")
        #expect(AuditExport.json([]) == "[]\n")
    }

    @Test("table aligns columns and defuses terminal control sequences")
    func table() {
        let text = AuditExport.table([Self.record(detail: "\u{1B}[2J\u{1B}]0;owned\u{7}cleared"), Self.record(detail: "short")])
        let lines = text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(!text.contains("\u{1B}"))
        #expect(!text.contains("\u{7}"))
        let eventColumn = lines.map { $0.firstRange(of: "apple_error")?.lowerBound.utf16Offset(in: $0) }
        #expect(eventColumn[1] != nil && eventColumn[1] == eventColumn[2])
        #expect(lines[0].hasPrefix("OCCURRED AT"))
    }
}
