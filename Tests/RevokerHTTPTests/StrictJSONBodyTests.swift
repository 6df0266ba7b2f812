import Foundation
import NIOHTTP1
import Testing

/// A JSON request body is read strictly (`StrictJSONDecoder`): each refusal is answered with
/// its documented status, detail and field, over real HTTP, and stores nothing.
@Suite("HTTP API: strict JSON bodies")
struct StrictJSONBodyTests {
    static let unknown =
        "Unknown field; known fields: access_token, apple_user_id, authorization_code, client_id, external_reference, id_token, max_attempts, provider, redirect_uri, refresh_token, user_id."
    static let string = "This field must be a string."
    static let integer = "This field must be an integer."
    static let null = "Leave this field out instead of sending null."
    static let json = "application/json"

    /// Name, members written out (so that `1.0` and `1e2` reach the server as they are; each
    /// replaces the valid body's member of its name, or is added), content type, and the
    /// problem's status, detail and field.
    static let refusals: [(String, [(String, String)], String?, Int, String, String?)] = [
        ("number for a string", [("client_id", "42")], json, 422, string, "client_id"),
        ("object for a string", [("user_id", "{}")], json, 422, string, "user_id"),
        ("string for an integer", [("max_attempts", #""3""#)], json, 422, integer, "max_attempts"),
        ("boolean for an integer", [("max_attempts", "true")], json, 422, integer, "max_attempts"),
        ("fraction", [("max_attempts", "1.0")], json, 422, integer, "max_attempts"),
        ("exponent", [("max_attempts", "1e2")], json, 422, integer, "max_attempts"),
        ("integer beyond 64 bits", [("max_attempts", "99999999999999999999")], json, 422, integer, "max_attempts"),
        ("null for an optional field", [("redirect_uri", "null")], json, 422, null, "redirect_uri"),
        ("null for a required field", [("client_id", "null")], json, 422, null, "client_id"),
        ("the first fault in field order", [("max_attempts", "1.5"), ("access_token", "7")], json, 422, string, "access_token"),
        ("unknown field", [("refresh_tokn", #""x""#)], json, 400, unknown, "refresh_tokn"),
        ("unknown field, named printably", [(#"a b\u0007\u00e9c"#, "1")], json, 400, unknown, "abc"),
        ("unknown field before a wrong type", [("max_attempts", #""x""#), ("zzz", "1")], json, 400, unknown, "zzz"),
        (
            "duplicate key", [("user_id", #""a""#), ("user_id", #""b""#)], json, 400,
            "The body is not well-formed JSON: an object has the same key twice.", nil
        ),
        ("wrong content type", [], "text/plain", 415, "The body must be application/json.", "Content-Type"),
        ("no content type", [], nil, 415, "The body must be application/json.", "Content-Type"),
        (
            "too large", [("redirect_uri", "\"https://example.com/\(String(repeating: "p", count: 5000))\"")], json, 413,
            "The request body is larger than 4096 bytes.", nil
        ),
    ]

    /// The valid body (the three fields a request needs) with `members` replacing or added.
    static func body(token: String, _ members: [(String, String)]) -> Data {
        let valid = [("client_id", #""com.example.notes""#), ("external_reference", #""acct""#), ("refresh_token", "\"\(token)\"")]
        let replaced = valid.map { name, value in (name, members.first { $0.0 == name }?.1 ?? value) }
        let added = members.filter { name, _ in !valid.contains { $0.0 == name } }
        return Data("{\((replaced + added).map { "\"\($0)\": \($1)" }.joined(separator: ", "))}".utf8)
    }

    @Test func eachRefusalHasItsStatusDetailAndField() async throws {
        try await APIHarness.with { api in
            let token = try await api.mintRefreshToken(subject: "strict").token
            for (name, members, contentType, status, detail, field) in Self.refusals {
                let body = Self.body(token: token, members)
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, body: body, contentType: contentType)
                #expect(answer.status == status, "\(name): \(answer.text)")
                #expect(answer.headers.first(name: "Content-Type") == "application/problem+json", "\(name)")
                #expect(answer.json["detail"] as? String == detail, "\(name): \(answer.text)")
                #expect(answer.json["field"] as? String == field, "\(name): \(answer.text)")
            }
            #expect(try await api.storedCount() == 0, "nothing was stored")
        }
    }

    @Test func aMissingRequiredFieldIsNamed() async throws {
        try await APIHarness.with { api in
            let token = try await api.mintRefreshToken(subject: "strict").token
            let cases: [(String, String)] = [
                (#"{"external_reference": "acct", "refresh_token": "\#(token)"}"#, "client_id"),
                (#"{"client_id": "com.example.notes", "refresh_token": "\#(token)"}"#, "external_reference"),
                ("{}", "client_id"),
            ]
            for (body, field) in cases {
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, body: Data(body.utf8))
                #expect(answer.status == 422, "\(field): \(answer.text)")
                #expect(answer.json["detail"] as? String == "This field is required.", "\(field): \(answer.text)")
                #expect(answer.json["field"] as? String == field, "\(answer.text)")
            }
            #expect(try await api.storedCount() == 0, "nothing was stored")
        }
    }

    @Test func aValidBodyWithOptionalFieldsIsAnsweredWithSortedJSON() async throws {
        try await APIHarness.with { api in
            let token = try await api.mintRefreshToken(subject: "strict").token
            let members = [
                ("provider", #""apple""#), ("user_id", #""strict""#), ("redirect_uri", #""https://example.com/callback""#), ("max_attempts", "3"),
            ]
            let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, body: Self.body(token: token, members))
            #expect(answer.status == 202, "\(answer.text)")
            #expect(answer.headers.first(name: "Content-Type") == "application/json")
            #expect(answer.json["max_attempts"] as? Int == 3 && answer.json["user_id"] as? String == "strict", "\(answer.text)")
            #expect(answer.text.hasPrefix(#"{"apple_user_id":"strict","attempts":0,"#), "keys sorted: \(answer.text)")
        }
    }
}
