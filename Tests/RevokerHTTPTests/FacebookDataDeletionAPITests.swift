import FacebookLogin
import FacebookLoginSandbox
import Foundation
import NIOHTTP1
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// Facebook's Data Deletion Request Callback over real HTTP: the sandbox posts a genuine
/// `signed_request` to `POST /v1/facebook/data-deletion/{app_id}`; the answer is the status page
/// and its confirmation code, the person's held grant ends, the backend is told and records its
/// decision, and the page says so to whoever holds the code, and to no one else.
@Suite("HTTP API: Facebook's Data Deletion Request Callback and its status page")
struct FacebookDataDeletionAPITests {
    static let app = FacebookDeauthorizeAPITests.app

    static func with<T: Sendable>(_ body: (APIHarness, _ grants: String) async throws -> T) async throws -> T {
        let grants = APIHarness.Keys.make()
        let extra: [[String: any Sendable]] = [
            ["name": "grants-writer", "sha256": APIHarness.Keys.hash(grants), "scopes": ["grants:write", "grants:read"]]
        ]
        return try await APIHarness.with(
            runWorker: true,
            http: ["grant_exchange_wait_seconds": 30],
            apps: [.facebook: [app]],
            extraKeys: extra
        ) { api in
            try await body(api, grants)
        }
    }

    static func page(_ api: APIHarness, _ path: String) async throws -> APIHarness.Answer {
        try await api.call(.GET, path, key: nil, contentType: nil)
    }

    @Test func aGenuineRequestIsAnsweredWithItsStatusPageEndsTheGrantAndTellsTheBackend() async throws {
        try await Self.with { api, grants in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let person = try await facebook.signIn(appID: Self.app, userID: "5001")
            api.stack.secrets.add(person.value)
            let held = try await api.call(
                .POST,
                "/v1/grants",
                key: grants,
                json: ["provider": "facebook", "client_id": Self.app, "account_reference": "member-77", "access_token": person.value]
            )
            #expect(held.status == 201, "\(held.text)")
            let grantID = try #require(held.json["id"] as? String)

            let url = api.baseURL + "/v1/facebook/data-deletion/\(Self.app)"
            let delivery = try await facebook.sendCallback(.init(url: url, .init(appID: Self.app, userID: "5001")))
            #expect(delivery.status == 200, "\(delivery.body)")
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body.utf8)) as? [String: Any])
            let code = try #require(answer["confirmation_code"] as? String)
            #expect(code.count == 20 && code.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber) }, "alphanumeric: \(code)")
            #expect(answer["url"] as? String == api.baseURL + "/deletion-status/\(code)", "\(answer)")

            // Facebook sends it again: the same code, one message.
            let replay = try await api.call(
                .POST,
                "/v1/facebook/data-deletion/\(Self.app)",
                key: nil,
                body: Data(FormEncoding.encodedBytes([("signed_request", delivery.signedRequest)])),
                contentType: FormEncoding.contentType
            )
            #expect(replay.status == 200 && replay.json["confirmation_code"] as? String == code, "\(replay.text)")
            #expect(try await FacebookDeauthorizeAPITests.storedMessages(api) == 1)

            // The person's grant ended with the request, without a call to Facebook.
            let grant = try await api.call(.GET, "/v1/grants/\(grantID)", key: grants)
            #expect(grant.json["state"] as? String == "dead" && grant.json["end_reason"] as? String == "data-deletion", "\(grant.text)")

            // The backend is told, with the code it decides with.
            let events = try await AppleNotificationsAPITests.feed(api, count: 2)
            let told = try #require(events.first { $0["type"] as? String == "facebook.data_deletion_requested" }, "\(events)")
            let data = AppleNotificationsAPITests.data(told)
            #expect(data["erasure_code"] as? String == code && data["user_id"] as? String == "5001" && data["provider"] as? String == "facebook")

            // The page, by its code: in progress, and nothing the person did not give.
            let open = try await Self.page(api, "/deletion-status/\(code)")
            #expect(open.status == 200 && open.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true, "\(open.text)")
            #expect(open.text.contains("In progress") && open.text.contains("Your sign-in with Facebook was ended here."), "\(open.text)")
            for hidden in ["5001", "member-77", Self.app, grantID] { #expect(!open.text.contains(hidden), "the page shows no \(hidden)") }
            #expect(open.headers.first(name: "Content-Security-Policy")?.contains("default-src 'none'") == true)
            #expect(open.headers.first(name: "Cache-Control") == "no-store")

            // The backend refuses, with a justification the person reads; a decision stands once made.
            let reason = "We keep invoices for 10 years as the tax law requires; everything else was deleted."
            let refused = try await api.call(
                .POST,
                "/v1/erasures/\(code)/decision",
                key: api.keys.writer,
                json: ["state": "refused", "justification": reason]
            )
            #expect(refused.status == 200 && refused.json["state"] as? String == "refused", "\(refused.text)")
            let again = try await api.call(
                .POST,
                "/v1/erasures/\(code)/decision",
                key: api.keys.writer,
                json: ["state": "refused", "justification": reason]
            )
            #expect(again.status == 200, "the same decision again changes nothing: \(again.text)")
            let other = try await api.call(.POST, "/v1/erasures/\(code)/decision", key: api.keys.writer, json: ["state": "deleted"])
            #expect(other.status == 409, "\(other.text)")
            let shown = try await api.call(.GET, "/v1/erasures/\(code)", key: api.keys.reader)
            #expect(shown.json["state"] as? String == "refused" && shown.json["status_url"] as? String == answer["url"] as? String)
            #expect(try await api.call(.GET, "/v1/erasures/\(code)", key: api.keys.notesOnly).status == 404, "a key for other apps sees nothing")
            let decided = try await Self.page(api, "/deletion-status/\(code)")
            #expect(decided.text.contains("Not deleted") && decided.text.contains("tax law requires"), "\(decided.text)")
            let audit = try await api.stack.audit()
            #expect(audit.contains { $0.event == "note" && $0.actor == "api:billing" && ($0.detail ?? "").contains("refused") })
            try api.stack.expectNoSecrets(in: open.text + decided.text + delivery.body)
        }
    }

    @Test func aDecisionIsCheckedAndTheBackendMayConfirmTheDeletion() async throws {
        try await Self.with { api, _ in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let url = api.baseURL + "/v1/facebook/data-deletion/\(Self.app)"
            let delivery = try await facebook.sendCallback(.init(url: url, .init(appID: Self.app, userID: "5002")))
            let code = try #require(
                (try JSONSerialization.jsonObject(with: Data(delivery.body.utf8)) as? [String: Any])?["confirmation_code"] as? String
            )
            #expect((try await Self.page(api, "/deletion-status/\(code)")).text.contains("Nothing was held here"))
            for (body, field) in [
                (["state": "refused"], "justification"), (["state": "refused", "justification": "  "], "justification"),
                (["state": "deleted", "justification": "done"], "justification"), (["state": "maybe"], "state"),
            ] as [([String: String], String)] {
                let refused = try await api.call(.POST, "/v1/erasures/\(code)/decision", key: api.keys.writer, json: body)
                #expect(refused.status == 422 && refused.json["field"] as? String == field, "\(body): \(refused.text)")
            }
            #expect(try await api.call(.POST, "/v1/erasures/\(code)/decision", key: api.keys.reader, json: ["state": "deleted"]).status == 403)
            let unknown = try await api.call(.POST, "/v1/erasures/AAAAAAAAAAAAAAAAAAAA/decision", key: api.keys.writer, json: ["state": "deleted"])
            #expect(unknown.status == 404, "\(unknown.text)")
            let deleted = try await api.call(.POST, "/v1/erasures/\(code)/decision", key: api.keys.writer, json: ["state": "deleted"])
            #expect(deleted.status == 200 && deleted.json["state"] as? String == "deleted", "\(deleted.text)")
            let page = try await Self.page(api, "/deletion-status/\(code)")
            #expect(page.text.contains("Deleted: the app confirmed it deleted your data."), "\(page.text)")

            // The justification's limit counts code points, as the database does: 2,000 (in 1,000
            // accented letters, each a letter and a combining accent) are taken, 2,002 are not.
            let second = try await facebook.sendCallback(.init(url: url, .init(appID: Self.app, userID: "5004")))
            let other = try #require(
                (try JSONSerialization.jsonObject(with: Data(second.body.utf8)) as? [String: Any])?["confirmation_code"] as? String
            )
            let accented = "e\u{301}"
            let tooLong = try await api.call(
                .POST,
                "/v1/erasures/\(other)/decision",
                key: api.keys.writer,
                json: ["state": "refused", "justification": String(repeating: accented, count: 1001)]
            )
            #expect(tooLong.status == 422 && tooLong.json["field"] as? String == "justification", "\(tooLong.text)")
            let longest = try await api.call(
                .POST,
                "/v1/erasures/\(other)/decision",
                key: api.keys.writer,
                json: ["state": "refused", "justification": String(repeating: accented, count: 1000)]
            )
            #expect(longest.status == 200 && longest.json["state"] as? String == "refused", "\(longest.text)")
        }
    }

    /// Only the code reaches a page; codes that match nothing are counted per address, and an
    /// address that tries too many is refused for a while, even with a real code.
    @Test func thePageIsReachedByItsCodeOnlyAndGuessingIsRefused() async throws {
        try await Self.with { api, _ in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let url = api.baseURL + "/v1/facebook/data-deletion/\(Self.app)"
            let delivery = try await facebook.sendCallback(.init(url: url, .init(appID: Self.app, userID: "5003")))
            let code = try #require(
                (try JSONSerialization.jsonObject(with: Data(delivery.body.utf8)) as? [String: Any])?["confirmation_code"] as? String
            )
            #expect(try await Self.page(api, "/deletion-status/\(code)").status == 200)
            let lower = try await Self.page(api, "/deletion-status/\(code.lowercased())")
            #expect(lower.status == 404 && lower.text.contains("No request has this code"), "\(lower.text)")
            for guess in 0..<19 {
                let miss = try await Self.page(api, "/deletion-status/" + String(repeating: "A", count: 19) + "\(guess % 8 + 2)")
                #expect(miss.status == 404, "guess \(guess): \(miss.status)")
            }
            let refused = try await Self.page(api, "/deletion-status/\(code)")
            #expect(refused.status == 429 && refused.headers.first(name: "Retry-After") != nil, "\(refused.status) \(refused.text)")
            #expect(!refused.text.contains(code), "a refused address learns nothing of the code")
        }
    }
}
