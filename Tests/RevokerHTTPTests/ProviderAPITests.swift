import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// A request names its provider; Apple is the default, and nothing else is accepted unless configured.
@Suite("HTTP API: providers")
struct ProviderAPITests {
    @Test func appleIsTheDefaultAndUnconfiguredProvidersAreRefusedByName() async throws {
        try await APIHarness.with { api in
            let (_, token) = try await api.mintRefreshToken(subject: "user-p")
            let plain: [String: Any] = [
                "client_id": "com.example.notes", "external_reference": "account-p", "refresh_token": token, "user_id": "user-p",
            ]
            let created = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: plain)
            #expect(created.status == 202, "\(created.text)")
            #expect(created.json["provider"] as? String == "apple")
            #expect(created.json["user_id"] as? String == "user-p")
            #expect(created.json["apple_user_id"] as? String == "user-p", "Apple's requests keep the older field")

            var named = plain
            named["provider"] = "apple"
            let replay = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: named)
            #expect(replay.status == 200, "naming the default is the same request")
            #expect(replay.json["id"] as? String == created.json["id"] as? String)

            let cases: [(String, Any, String)] = [
                ("provider", "google", "provider"),
                ("provider", "Apple", "provider"),
                ("provider", "", "provider"),
                ("apple_user_id", "user-p", "apple_user_id"),
            ]
            for (field, value, named) in cases {
                var body = plain
                body["external_reference"] = "account-refused"
                body[field] = value
                let refused = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body)
                #expect(refused.status == 422, "\(field)=\(value): \(refused.text)")
                #expect(refused.json["field"] as? String == named, "\(refused.text)")
                #expect(!refused.text.contains(token))
            }
            #expect(try await api.storedCount() == 1)

            let byProvider = try await api.call(.GET, "/v1/revocations?provider=apple&user_id=user-p", key: api.keys.reader)
            #expect((byProvider.json["revocations"] as? [Any])?.count == 1)
            let none = try await api.call(.GET, "/v1/revocations?provider=google", key: api.keys.reader)
            #expect((none.json["revocations"] as? [Any])?.count == 0)
            let malformed = try await api.call(.GET, "/v1/revocations?provider=0.5", key: api.keys.reader)
            #expect(malformed.status == 400 && malformed.json["field"] as? String == "provider", "\(malformed.text)")

            _ = try await api.stack.drain()
            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 1)
            let final = try #require(events.first { $0["type"] as? String == "revocation.succeeded" })
            let data = try #require(final["data"] as? [String: Any])
            #expect(data["provider"] as? String == "apple")
            #expect(data["apple_user_id"] as? String == "user-p")
            let enqueued = try await api.stack.audit().first { $0.event == "enqueued" }
            #expect(enqueued?.detail == "provider=apple kind=refresh_token")
        }
    }

    /// A request whose provider this worker does not serve (written by SQL, or enqueued before a
    /// provider was removed from the configuration) ends `client_misconfigured`, without a call.
    @Test func aRequestOfAProviderTheWorkerDoesNotServeFailsAsMisconfigured() async throws {
        try await APIHarness.with { api in
            let (grantID, token) = try await api.mintRefreshToken(subject: "user-q")
            let new = try NewRevocation(
                provider: "google",
                clientID: "com.example.notes",
                externalReference: "account-q",
                credential: Credential(kind: .refreshToken, secret: token)
            )
            let request = try await api.stack.queue.enqueue(new, actor: "test").request
            #expect(request.provider == "google")
            _ = try await api.stack.drain()
            let finished = try #require(try await api.stack.queue.request(id: request.id))
            #expect(finished.outcome == .clientMisconfigured)
            #expect(finished.lastErrorCode == "unknown_client_id")
            let grant = try await api.stack.sandbox.admin.grant(grantID)
            #expect(grant.validations == 0 && grant.revokeCalls == 0, "the Apple app of the same client_id is not called")
        }
    }

    /// The backend hands over the user's current identity token instead of a user id: Revoker
    /// verifies it completely and binds the request to its `sub`; a token that does not verify
    /// stores nothing and says why.
    @Test func anIdentityTokenBindsTheRequestToItsVerifiedSubject() async throws {
        try await APIHarness.with { api in
            let admin = api.stack.sandbox.admin
            let (grantID, token) = try await api.mintRefreshToken(subject: "user-t")
            let idToken = try await admin.mintIdentityToken(.init(subject: "user-t", audience: "com.example.notes"))
            api.stack.secrets.add(idToken)
            let body: [String: Any] = ["client_id": "com.example.notes", "external_reference": "account-t", "refresh_token": token]

            let refusals: [(String, String)] = [
                (try await admin.mintIdentityToken(.init(subject: "user-t", audience: "com.example.photos")), "wrong_audience"),
                (
                    try await admin.mintIdentityToken(.init(subject: "user-t", audience: "com.example.notes", issuer: "https://evil.example")),
                    "wrong_issuer"
                ),
                (
                    try await admin.mintIdentityToken(.init(subject: "user-t", audience: "com.example.notes", expiresIn: -600)),
                    "expired_identity_token"
                ),
                (String(idToken.dropLast(4)) + "AAAA", "invalid_signature"),
                ("not-a-jwt", "malformed_identity_token"),
            ]
            for (bad, code) in refusals {
                var refused = body
                refused["id_token"] = bad
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: refused)
                #expect(answer.status == 422, "\(code): \(answer.text)")
                #expect(answer.json["field"] as? String == "id_token")
                #expect((answer.json["detail"] as? String)?.contains(code) == true, "\(answer.text)")
                #expect(!answer.text.contains(bad) && !answer.text.contains(token))
            }
            var both = body
            both["id_token"] = idToken
            both["user_id"] = "user-t"
            #expect(try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: both).status == 422)
            #expect(try await api.storedCount() == 0, "nothing is stored for a token that does not verify")

            var good = body
            good["id_token"] = idToken
            let created = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: good)
            #expect(created.status == 202, "\(created.text)")
            #expect(created.json["user_id"] as? String == "user-t")
            #expect(!created.text.contains(idToken))
            let enqueued = try await api.stack.audit().first { $0.event == "enqueued" }
            #expect(enqueued?.detail == "provider=apple kind=refresh_token user=verified_id_token")

            // Bound to the token's user, the request revokes that user's grant and no one else's.
            _ = try await api.stack.drain()
            let id = try #require(created.json["id"] as? String)
            let requestID = try #require(UUID(uuidString: id))
            let finished = try #require(try await api.stack.queue.request(id: requestID))
            #expect(finished.outcome == .revoked)
            #expect(try await admin.grant(grantID).revoked)
        }
    }

    @Test func aGoogleGrantIsEnqueuedWithAVerifiedGoogleIDTokenAndReportedAsGoogles() async throws {
        let web = "1000-notes.apps.googleusercontent.com"
        let ios = "1000-ios.apps.googleusercontent.com"
        try await APIHarness.with(runWorker: true, apps: [.google: [web]]) { api in
            let google = api.stack.sandbox.google
            let minted = try await google.mintRefreshToken(clientID: web, subject: "110169484474386276334")
            api.stack.secrets.add(minted.value)
            let body: [String: Any] = [
                "provider": "google", "client_id": web, "external_reference": "account-g", "refresh_token": minted.value,
            ]
            // Wrong in one way each: refused on id_token, naming why, storing nothing.
            let refusals: [(GoogleSandboxAdmin.IdentityTokenRequest, String)] = [
                (.init(subject: "110169484474386276334", audience: [ios]), "wrong_audience"),
                (.init(subject: "110169484474386276334", audience: [web], issuer: "https://accounts.google.example"), "wrong_issuer"),
                (.init(subject: "110169484474386276334", audience: [web], expiresIn: -300), "expired_identity_token"),
                (.init(subject: "110169484474386276334", audience: [web], signature: .unknownKey), "unknown_signing_key"),
            ]
            for (request, code) in refusals {
                var refused = body
                refused["id_token"] = try await google.mintIdentityToken(request)
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: refused)
                #expect(answer.status == 422 && answer.json["field"] as? String == "id_token", "\(code): \(answer.text)")
                #expect((answer.json["detail"] as? String)?.contains(code) == true, "\(answer.text)")
            }
            #expect(try await api.storedCount() == 0)
            // The same token of Google's accepted for Apple's app is refused: another provider's app.
            var crossed = body
            crossed["provider"] = "apple"
            crossed["client_id"] = "com.example.notes"
            crossed["id_token"] = try await google.mintIdentityToken(.init(subject: "110169484474386276334", audience: [web]))
            #expect(try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: crossed).status == 422)

            var good = body
            good["id_token"] = try await google.mintIdentityToken(
                .init(
                    subject: "110169484474386276334",
                    audience: [web],
                    issuer: "accounts.google.com",
                    emailVerified: true,
                    emailVerifiedAsString: true
                )
            )
            let created = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: good)
            #expect(created.status == 202, "\(created.text)")
            #expect(created.json["provider"] as? String == "google")
            #expect(created.json["user_id"] as? String == "110169484474386276334")
            #expect(created.json["apple_user_id"] is NSNull, "a Google request has no Apple user id")
            let id = try #require(created.json["id"] as? String)

            let events = try await AppleNotificationsAPITests.feed(api, count: 1)
            let mine = try #require(events.first { ($0["data"] as? [String: Any])?["request_id"] as? String == id }, "\(events)")
            #expect(mine["type"] as? String == "revocation.succeeded")
            let data = mine["data"] as? [String: Any]
            #expect(data?["provider"] as? String == "google")
            #expect(data?["user_id"] as? String == "110169484474386276334" && data?["apple_user_id"] == nil)
            let listed = try await api.call(.GET, "/v1/revocations?provider=google&user_id=110169484474386276334", key: api.keys.reader)
            #expect((listed.json["revocations"] as? [[String: Any]])?.first?["outcome"] as? String == "revoked")
            #expect(try await google.grant(minted.grantID).revocations == 1)
        }
    }

    @Test func aProviderNameHasOneShape() {
        for name in ["apple", "google", "a", "x_1", String(repeating: "a", count: 32)] {
            #expect(NewRevocation.isProviderName(name), "\(name)")
        }
        for name in ["", "Apple", "1apple", "_a", "apple-id", "apple ", String(repeating: "a", count: 33), "äpple"] {
            #expect(!NewRevocation.isProviderName(name), "\(name)")
            #expect(throws: NewRevocation.Invalid.self) {
                try NewRevocation(provider: name, clientID: "c", externalReference: "r", credential: Credential(kind: .refreshToken, secret: "t"))
            }
        }
    }
}
