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

/// Facebook's Deauthorize Callback over real HTTP: the sandbox signs a `signed_request` with the
/// app's secret and posts it to `POST /v1/facebook/deauthorize/{app_id}` as Facebook does when a
/// person removes the app.
@Suite("HTTP API: Facebook's Deauthorize Callback")
struct FacebookDeauthorizeAPITests {
    static let app = "1234567890123456"

    static func storedMessages(_ api: APIHarness) async throws -> Int {
        try await ProviderMessages(client: api.stack.database.client, logger: api.stack.logger).count(from: .facebook)
    }

    static func sandbox(_ api: APIHarness) -> FacebookSandboxAdmin {
        FacebookSandboxAdmin(baseURL: api.stack.sandbox.baseURL + FacebookSandbox.prefix, httpClient: api.stack.sandbox.httpClient)
    }

    @Test func aGenuineCallbackEndsThePersonsRequestsOnceAndTellsTheBackend() async throws {
        try await APIHarness.with(apps: [.facebook: [Self.app]]) { api in
            let facebook = Self.sandbox(api)
            let url = api.baseURL + "/v1/facebook/deauthorize/\(Self.app)"
            let leaving = try await api.stack.enqueue(
                provider: .facebook,
                clientID: Self.app,
                reference: "acct-1",
                kind: .accessToken,
                subject: "1001",
                userID: "1001"
            )
            let staying = try await api.stack.enqueue(
                provider: .facebook,
                clientID: Self.app,
                reference: "acct-2",
                kind: .accessToken,
                subject: "1002",
                userID: "1002"
            )

            let delivery = try await facebook.sendCallback(.init(url: url, .init(appID: Self.app, userID: "1001")))
            #expect(delivery.status == 200, "\(delivery.body)")
            let ended = try #require(try await api.stack.queue.request(id: leaving.request.id))
            #expect(ended.state == .succeeded && ended.outcome == .revokedByUser && !ended.hasCredential)
            #expect(try await api.stack.queue.request(id: staying.request.id)?.state == .pending, "another person's request waits")
            let grant = try await facebook.grant(leaving.grantID)
            #expect(grant.revokedByUser && grant.revokeCalls == 0, "ended without a call to Facebook")

            // Facebook calls again with the same request: nothing changes.
            let replay = try await api.call(
                .POST,
                "/v1/facebook/deauthorize/\(Self.app)",
                key: nil,
                body: Data(FormEncoding.encodedBytes([("signed_request", delivery.signedRequest)])),
                contentType: FormEncoding.contentType
            )
            #expect(replay.status == 200, "\(replay.text)")
            #expect(try await Self.storedMessages(api) == 1)

            let events = try await AppleNotificationsAPITests.feed(api, count: 2)
            let told = events.filter { $0["type"] as? String == "facebook.deauthorized" }
            #expect(told.count == 1, "\(events.compactMap { $0["type"] })")
            let event = try #require(told.first)
            let data = AppleNotificationsAPITests.data(event)
            #expect(event["client_id"] as? String == Self.app)
            #expect(data["provider"] as? String == "facebook" && data["user_id"] as? String == "1001")
            let audit = try await api.stack.audit()
            #expect(audit.contains { $0.event == "provider_message" && $0.externalReference == "acct-1" })
            #expect(audit.contains { $0.event == "succeeded" && $0.externalReference == "acct-1" && $0.actor == "facebook:deauthorize" })
        }
    }

    /// Ten forged or malformed callbacks, each refused with a problem naming `signed_request`,
    /// and nothing stored; an app id not configured here is answered as a forgery. The same at
    /// both callbacks.
    @Test(arguments: ["deauthorize", "data-deletion"]) func forgedCallbacksAreRefusedAndStoreNothing(callback: String) async throws {
        try await APIHarness.with(apps: [.facebook: [Self.app]]) { api in
            let facebook = Self.sandbox(api)
            let path = "/v1/facebook/\(callback)/\(Self.app)"
            let genuine = try await facebook.signedRequest(.init(appID: Self.app, userID: "1001"))
            let parts = genuine.split(separator: ".").map(String.init)
            let forged: [(String, FacebookSandboxAdmin.SignedRequestRequest?, String?)] = [
                ("another secret", .init(appID: Self.app, userID: "1001", secret: "ffffffffffffffffffffffffffffffff"), nil),
                ("HMAC-SHA1", .init(appID: Self.app, userID: "1001", algorithm: "HMAC-SHA1"), nil),
                ("two days old", .init(appID: Self.app, userID: "1001", issuedIn: -172_800), nil),
                ("an hour ahead", .init(appID: Self.app, userID: "1001", issuedIn: 3600), nil),
                ("a user id that is not digits", .init(appID: Self.app, userID: "me"), nil),
                (
                    "the payload swapped", nil,
                    parts[0] + "." + Data("{\"algorithm\":\"HMAC-SHA256\",\"issued_at\":1,\"user_id\":\"1\"}".utf8).base64EncodedString()
                ),
                ("no period", nil, parts[0] + parts[1]),
                ("three parts", nil, genuine + ".e30"),
                ("wrong padding", nil, parts[0] + "===." + parts[1]),
                ("empty", nil, ""),
            ]
            for (name, request, text) in forged {
                let signed: String
                if let request {
                    signed = try await facebook.signedRequest(request)
                } else {
                    signed = text ?? ""
                }
                let answer = try await api.call(
                    .POST,
                    path,
                    key: nil,
                    body: Data(FormEncoding.encodedBytes([("signed_request", signed)])),
                    contentType: FormEncoding.contentType
                )
                #expect(answer.status == 400, "\(name): \(answer.text)")
                #expect(answer.json["field"] as? String == "signed_request", "\(name): \(answer.text)")
                #expect(!answer.text.contains(parts[0]), "\(name): the answer repeats nothing of the request")
            }
            // Not a form at all.
            let json = try await api.call(.POST, path, key: nil, json: ["signed_request": genuine])
            #expect(json.status == 400, "\(json.text)")

            // The genuine request, at an app id not configured here: answered as a forged one.
            let elsewhere = try await api.call(
                .POST,
                "/v1/facebook/\(callback)/6543210987654321",
                key: nil,
                body: Data(FormEncoding.encodedBytes([("signed_request", genuine)])),
                contentType: FormEncoding.contentType
            )
            let forgedAnswer = try await api.call(
                .POST,
                path,
                key: nil,
                body: Data(
                    FormEncoding.encodedBytes([
                        (
                            "signed_request",
                            try await facebook.signedRequest(.init(appID: Self.app, userID: "1001", secret: "ffffffffffffffffffffffffffffffff"))
                        )
                    ])
                ),
                contentType: FormEncoding.contentType
            )
            #expect(elsewhere.status == 400 && elsewhere.json["detail"] as? String == forgedAnswer.json["detail"] as? String, "\(elsewhere.text)")
            #expect(try await Self.storedMessages(api) == 0)
        }
    }

    @Test func withoutAFacebookAppTheCallbackIsNotReceived() async throws {
        try await APIHarness.with { api in
            let answer = try await api.call(
                .POST,
                "/v1/facebook/deauthorize/\(Self.app)",
                key: nil,
                body: Data("signed_request=x.y".utf8),
                contentType: FormEncoding.contentType
            )
            #expect(answer.status == 404, "\(answer.text)")
        }
    }
}
