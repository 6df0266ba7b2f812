import AppleSignIn
import AppleSignInSandbox
import Foundation
import NIOHTTP1
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// `/v1/revocations` over real HTTP against PostgreSQL.
@Suite("HTTP API: revocations")
struct RevocationsAPITests {
    @Test func enqueueReplayConflictGetListAndCancel() async throws {
        try await APIHarness.with { api in
            let (_, token) = try await api.mintRefreshToken(subject: "user-1")
            let body: [String: Any] = [
                "client_id": "com.example.notes", "external_reference": "account-1", "refresh_token": token, "apple_user_id": "user-1",
            ]
            let created = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body)
            #expect(created.status == 202, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            #expect(created.json["state"] as? String == "pending")
            #expect(created.json["credential_kind"] as? String == "refresh_token")
            #expect(created.json["has_credential"] as? Bool == true)

            let replay = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body)
            #expect(replay.status == 200)
            #expect(replay.json["id"] as? String == id, "a replay returns the existing request")

            var other = body
            other["refresh_token"] = try await api.mintRefreshToken(subject: "user-1").token
            let conflict = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: other)
            #expect(conflict.status == 409)
            #expect(conflict.headers.first(name: "Content-Type") == "application/problem+json")
            #expect(try await api.storedCount() == 1)

            let shown = try await api.call(.GET, "/v1/revocations/\(id)", key: api.keys.reader)
            #expect(shown.status == 200 && shown.json["external_reference"] as? String == "account-1")
            #expect(try await api.call(.GET, "/v1/revocations/\(UUID())", key: api.keys.reader).status == 404)
            #expect(try await api.call(.GET, "/v1/revocations/not-a-uuid", key: api.keys.reader).status == 400)

            _ = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                json: [
                    "client_id": "com.example.photos", "external_reference": "account-2",
                    "access_token": try await api.mintRefreshToken(clientID: "com.example.photos", subject: "u2").token,
                ]
            )
            let listed = try await api.call(.GET, "/v1/revocations?client_id=com.example.notes&state=pending", key: api.keys.reader)
            let items = try #require(listed.json["revocations"] as? [[String: Any]])
            #expect(items.map { $0["id"] as? String } == [id])
            let all = try await api.call(.GET, "/v1/revocations?limit=10", key: api.keys.reader)
            #expect((all.json["revocations"] as? [Any])?.count == 2)

            let cancelled = try await api.call(.POST, "/v1/revocations/\(id)/cancel", key: api.keys.writer)
            #expect(cancelled.status == 200)
            #expect(cancelled.json["state"] as? String == "cancelled" && cancelled.json["has_credential"] as? Bool == false)
            let again = try await api.call(.POST, "/v1/revocations/\(id)/cancel", key: api.keys.writer)
            #expect(again.status == 409)
            let audit = try await api.stack.audit().filter { $0.requestID?.uuidString.lowercased() == id }
            #expect(audit.map(\.event) == ["enqueued", "cancelled", "credential_erased"])
            #expect(audit.allSatisfy { $0.actor == "api:billing" }, "the key's name is the actor")
        }
    }

    @Test func eachScopeIsRequiredAndEnforced() async throws {
        try await APIHarness.with { api in
            let id = UUID().uuidString
            let cases: [(HTTPMethod, String, String?, Int)] = [
                (.GET, "/v1/revocations", nil, 401),
                (.GET, "/v1/revocations", "rvk_unknown", 401),
                (.GET, "/v1/revocations", api.keys.writer, 403),
                (.GET, "/v1/revocations", api.keys.auditor, 403),
                (.GET, "/v1/revocations", api.keys.reader, 200),
                (.GET, "/v1/revocations", api.keys.admin, 200),
                (.POST, "/v1/revocations/\(id)/cancel", api.keys.reader, 403),
                (.POST, "/v1/revocations/\(id)/cancel", api.keys.writer, 404),
                (.POST, "/v1/revocations/\(id)/requeue", api.keys.writer, 403),
                (.POST, "/v1/revocations/\(id)/requeue", api.keys.admin, 404),
                (.GET, "/v1/audit", api.keys.reader, 403),
                (.GET, "/v1/audit", api.keys.auditor, 200),
                (.GET, "/v1/audit", api.keys.admin, 200),
                (.GET, "/healthz", nil, 200),
                (.GET, "/metrics", nil, 200),
                (.GET, "/openapi.yaml", nil, 200),
            ]
            for (method, path, key, expected) in cases {
                let answer = try await api.call(method, path, key: key)
                #expect(answer.status == expected, "\(method) \(path) with \(key == nil ? "no key" : "a key"): \(answer.text)")
                if expected == 401 {
                    #expect(answer.headers.first(name: "WWW-Authenticate")?.hasPrefix("Bearer") == true)
                }
                if expected >= 400 {
                    #expect(answer.headers.first(name: "Content-Type") == "application/problem+json")
                    #expect(answer.json["status"] as? Int == expected && (answer.json["detail"] as? String)?.isEmpty == false)
                }
            }
            let posted = try await api.call(.POST, "/v1/revocations", key: api.keys.reader, json: ["client_id": "com.example.notes"])
            #expect(posted.status == 403 && (posted.json["detail"] as? String)?.contains("revocations:write") == true)
        }
    }

    @Test func badInputIsRefusedWithTheFieldAndNothingIsStored() async throws {
        try await APIHarness.with { api in
            let token = try await api.mintRefreshToken(subject: "u").token
            let valid: [String: Any] = ["client_id": "com.example.notes", "external_reference": "acct", "refresh_token": token]
            func with(_ changes: [String: Any?]) -> Data {
                var body = valid
                for (key, value) in changes { body[key] = value }
                return try! JSONSerialization.data(withJSONObject: body)
            }
            let cases: [(String, Data, String?, Int, String?)] = [
                ("wrong content type", with([:]), "text/plain", 415, "Content-Type"),
                ("no content type", with([:]), nil, 415, "Content-Type"),
                ("malformed JSON", Data("{\"client_id\": ".utf8), "application/json", 400, nil),
                ("not an object", Data("[1,2]".utf8), "application/json", 400, nil),
                ("invalid UTF-8", Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]), "application/json", 400, nil),
                ("unknown field", with(["refresh_tokn": "x"]), "application/json", 400, "refresh_tokn"),
                ("missing client_id", with(["client_id": nil]), "application/json", 422, "client_id"),
                ("missing external_reference", with(["external_reference": nil]), "application/json", 422, "external_reference"),
                ("empty external_reference", with(["external_reference": ""]), "application/json", 422, "external_reference"),
                (
                    "oversized external_reference", with(["external_reference": String(repeating: "r", count: 256)]), "application/json", 422,
                    "external_reference"
                ),
                ("control characters", with(["external_reference": "a\u{7}b"]), "application/json", 422, "external_reference"),
                ("number for a string", with(["client_id": 42]), "application/json", 422, "client_id"),
                ("no credential", with(["refresh_token": nil]), "application/json", 422, "authorization_code"),
                ("two credentials", with(["access_token": "abc"]), "application/json", 422, "access_token"),
                ("empty token", with(["refresh_token": ""]), "application/json", 422, "refresh_token"),
                ("token with a space", with(["refresh_token": "a b"]), "application/json", 422, "refresh_token"),
                ("token beyond ASCII", with(["refresh_token": "r\u{E9}vok\u{E9}"]), "application/json", 422, "refresh_token"),
                ("unknown client id", with(["client_id": "com.example.unknown"]), "application/json", 422, "client_id"),
                ("bad redirect uri", with(["redirect_uri": "not a url"]), "application/json", 422, "redirect_uri"),
                ("boolean max_attempts", with(["max_attempts": true]), "application/json", 422, "max_attempts"),
                ("fractional max_attempts", with(["max_attempts": 2.5]), "application/json", 422, "max_attempts"),
                ("null max_attempts", with(["max_attempts": NSNull()]), "application/json", 422, "max_attempts"),
                ("null beside the credential", with(["authorization_code": NSNull()]), "application/json", 422, "authorization_code"),
                ("max_attempts out of range", with(["max_attempts": 0]), "application/json", 422, "max_attempts"),
                (
                    "body over the limit",
                    with(["external_reference": "x", "redirect_uri": "https://example.com/" + String(repeating: "p", count: 5000)]),
                    "application/json", 413, nil
                ),
            ]
            for (name, body, contentType, status, field) in cases {
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, body: body, contentType: contentType)
                #expect(answer.status == status, "\(name): \(answer.text)")
                #expect(answer.headers.first(name: "Content-Type") == "application/problem+json", "\(name)")
                #expect(answer.json["field"] as? String == field, "\(name): \(answer.text)")
                #expect(!answer.text.contains(token), "\(name): the credential is never echoed")
            }
            let queries: [(String, String?)] = [
                ("/v1/revocations?state=done", "state"), ("/v1/revocations?limit=0", "limit"), ("/v1/revocations?color=red", "color"),
                ("/v1/revocations?created_before=yesterday", "created_before"), ("/v1/revocations?limit=1&limit=2", "limit"),
            ]
            for (path, field) in queries {
                let answer = try await api.call(.GET, path, key: api.keys.reader)
                #expect(answer.status == 400 && answer.json["field"] as? String == field, "\(path): \(answer.text)")
            }
            #expect(try await api.storedCount() == 0, "nothing was stored")
            let accepted = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                body: with([:]),
                contentType: "application/json; charset=utf-8"
            )
            #expect(accepted.status == 202, "the valid body itself is accepted: \(accepted.text)")
        }
    }

    @Test func aKnownPathAskedWithAnotherMethodIs405WithAllow() async throws {
        try await APIHarness.with { api in
            let cases: [(HTTPMethod, String, String)] = [
                (.DELETE, "/v1/revocations", "GET, POST"),
                (.PUT, "/v1/revocations/\(UUID())", "GET"),
                (.GET, "/v1/revocations/\(UUID())/cancel", "POST"),
                (.TRACE, "/healthz", "GET"),
            ]
            for (method, path, allow) in cases {
                let answer = try await api.call(method, path, key: api.keys.admin)
                #expect(answer.status == 405, "\(method) \(path): \(answer.text)")
                #expect(answer.headers.first(name: "Allow") == allow, "\(method) \(path)")
                #expect(answer.headers.first(name: "Content-Type") == "application/problem+json")
            }
            #expect(try await api.call(.GET, "/v1/nothing-here", key: api.keys.admin).status == 404, "an unknown path stays 404")
        }
    }

    @Test func aConfigurationFailureCanBeRequeuedByAnAdmin() async throws {
        try await APIHarness.with { api in
            let (grantID, token) = try await api.mintRefreshToken(clientID: "com.example.photos", subject: "p1")
            let created = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                json: [
                    "client_id": "com.example.photos", "external_reference": "photos-1", "refresh_token": token,
                ]
            )
            let id = try #require(created.json["id"] as? String)
            #expect(
                try await api.call(.POST, "/v1/revocations/\(id)/requeue", key: api.keys.admin).status == 409,
                "a pending request is not re-queued"
            )

            // A worker that lacks the app's configuration fails the request as client_misconfigured.
            var missing = api.stack.configuration
            missing.update(ApplePlugin.self) { $0.apps["com.example.photos"] = nil }
            _ = try await api.stack.drain(configuration: missing)
            let failed = try await api.call(.GET, "/v1/revocations/\(id)", key: api.keys.reader)
            #expect(failed.json["outcome"] as? String == "client_misconfigured")

            #expect(try await api.call(.POST, "/v1/revocations/\(id)/requeue", key: api.keys.writer).status == 403)
            let requeued = try await api.call(.POST, "/v1/revocations/\(id)/requeue", key: api.keys.admin)
            #expect(requeued.status == 202, "\(requeued.text)")
            #expect(requeued.json["requeued_from"] as? String == id && requeued.json["state"] as? String == "pending")
            #expect(try await api.call(.POST, "/v1/revocations/\(id)/requeue", key: api.keys.admin).status == 409, "only once")

            _ = try await api.stack.drain()
            let newID = try #require(requeued.json["id"] as? String)
            let finished = try await api.call(.GET, "/v1/revocations/\(newID)", key: api.keys.reader)
            #expect(finished.json["outcome"] as? String == "revoked")
            #expect(try await api.stack.sandbox.admin.grant(grantID).revoked)
        }
    }
}
