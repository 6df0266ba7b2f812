import FacebookLogin
import FacebookLoginSandbox
import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// Facebook Login grants taken into custody at sign-in (`POST /v1/grants` with the person's access
/// token, or with a Limited Login token alone) and ended when the account is deleted by reference,
/// beside Apple's and Google's, against the sandboxes over real HTTP with a worker running.
@Suite("HTTP API: Facebook grant custody")
struct FacebookCustodyAPITests {
    static let app = FacebookDeauthorizeAPITests.app
    static let otherApp = "6543210987654321"
    static let notes = GrantCustodyAPITests.notes
    static let web = GrantCustodyAPITests.web
    typealias Token = FacebookSandboxAdmin.LimitedLoginTokenRequest

    static func with<T: Sendable>(_ body: (APIHarness, _ writer: String, _ reader: String) async throws -> T) async throws -> T {
        let (writer, reader) = (APIHarness.Keys.make(), APIHarness.Keys.make())
        let extra: [[String: any Sendable]] = [
            ["name": "grants-writer", "sha256": APIHarness.Keys.hash(writer), "scopes": ["grants:write"]],
            ["name": "grants-reader", "sha256": APIHarness.Keys.hash(reader), "scopes": ["grants:read"]],
        ]
        let worker: [String: any Sendable] = [
            "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "client_secret_lifetime_seconds": 3600,
        ]
        return try await APIHarness.with(
            runWorker: true,
            worker: worker,
            http: ["grant_exchange_wait_seconds": 30],
            apps: [.google: [web], .facebook: [app, otherApp]],
            extraKeys: extra
        ) { api in
            try await body(api, writer, reader)
        }
    }

    static func register(_ api: APIHarness, _ writer: String, _ fields: [String: Any]) async throws -> APIHarness.Answer {
        try await api.call(.POST, "/v1/grants", key: writer, json: ["provider": "facebook", "client_id": app].merging(fields) { $1 })
    }

    @Test func aPersonsAccessTokenIsHeldOnceGraphProvesItThisAppsAndTheirs() async throws {
        try await Self.with { api, writer, _ in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let person = try await facebook.signIn(appID: Self.app, userID: "2001")
            api.stack.secrets.add(person.value)

            let held = try await Self.register(api, writer, ["account_reference": "fb-1", "access_token": person.value])
            #expect(held.status == 201, "\(held.text)")
            #expect(held.json["state"] as? String == "held")
            #expect(held.json["user_id"] as? String == "2001", "the person debug_token names")
            #expect(held.json["user_source"] as? String == "verified_id_token")
            #expect(held.json["registered_kind"] as? String == "access_token")
            #expect(!held.text.contains(person.value))
            let again = try await Self.register(api, writer, ["account_reference": "fb-1", "access_token": person.value])
            #expect(again.status == 200 && again.json["id"] as? String == held.json["id"] as? String, "the same token is the same grant")

            // Another app's token: not a grant of this app.
            let theirs = try await facebook.signIn(appID: Self.otherApp, userID: "2002")
            api.stack.secrets.add(theirs.value)
            let foreign = try await Self.register(api, writer, ["account_reference": "fb-2", "access_token": theirs.value])
            #expect(foreign.status == 422, "\(foreign.text)")
            #expect(foreign.json["state"] as? String == "failed" && foreign.json["end_reason"] as? String == "rejected", "\(foreign.text)")

            // A token of someone other than the user the backend names.
            let someone = try await facebook.signIn(appID: Self.app, userID: "2003")
            api.stack.secrets.add(someone.value)
            let mismatch = try await Self.register(
                api,
                writer,
                ["account_reference": "fb-3", "access_token": someone.value, "user_id": "2999"]
            )
            #expect(mismatch.status == 422 && mismatch.json["end_reason"] as? String == "subject_mismatch", "\(mismatch.text)")

            // A token Facebook never issued.
            let made = "EAA" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
            api.stack.secrets.add(made)
            let unknown = try await Self.register(api, writer, ["account_reference": "fb-4", "access_token": made])
            #expect(unknown.status == 422 && unknown.json["end_reason"] as? String == "already_invalid", "\(unknown.text)")

            // What Facebook does not issue, and what Apple's grants do not come as: refused before anything is stored.
            let refresh = try await Self.register(api, writer, ["account_reference": "fb-5", "refresh_token": made])
            #expect(refresh.status == 422 && refresh.json["field"] as? String == "refresh_token", "\(refresh.text)")
            #expect(refresh.text.contains("access_token or identity_token"), "\(refresh.text)")
            let appleAccess = try await api.call(
                .POST,
                "/v1/grants",
                key: writer,
                json: ["client_id": Self.notes, "account_reference": "fb-5", "access_token": made]
            )
            #expect(appleAccess.status == 422 && appleAccess.json["field"] as? String == "access_token", "\(appleAccess.text)")
            let appleIdentity = try await api.call(
                .POST,
                "/v1/grants",
                key: writer,
                json: ["client_id": Self.notes, "account_reference": "fb-5", "id_token": made]
            )
            #expect(appleIdentity.status == 422 && appleIdentity.json["field"] as? String == "id_token", "\(appleIdentity.text)")
            #expect(try await AccountDeletionAPITests.count(api, "SELECT count(*)::int FROM revoker.grants WHERE account_reference = 'fb-5'") == 0)
        }
    }

    @Test func aLimitedLoginTokenIsTheGrantOnceVerifiedCompletely() async throws {
        try await Self.with { api, writer, _ in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let genuine = try await facebook.limitedLoginToken(Token(appID: Self.app, subject: "3001", nonce: "n-1"))
            api.stack.secrets.add(genuine.value)
            let held = try await Self.register(api, writer, ["account_reference": "ll-1", "id_token": genuine.value])
            #expect(held.status == 201, "\(held.text)")
            #expect(held.json["user_id"] as? String == "3001" && held.json["user_source"] as? String == "verified_id_token")
            #expect(held.json["registered_kind"] as? String == "identity_token")
            #expect(try await facebook.grant(genuine.grantID).calls.isEmpty, "nothing to ask Facebook at sign-in: the token was verified here")

            // Each claim forged in turn, and each way of signing it bent: refused, nothing stored.
            var forgeries: [(String, Token)] = [
                ("another app", Token(appID: Self.app, subject: "3002", audience: Self.otherApp)),
                ("another issuer", Token(appID: Self.app, subject: "3002", issuer: "https://evil.example")),
                ("expired", Token(appID: Self.app, subject: "3002", expiresIn: -120)),
                ("issued ahead", Token(appID: Self.app, subject: "3002", issuedIn: 600)),
            ]
            for signature in SandboxJWTSignature.allCases where signature != .genuine {
                forgeries.append((signature.rawValue, Token(appID: Self.app, subject: "3002", signature: signature)))
            }
            for (index, (name, request)) in forgeries.enumerated() {
                let forged = try await facebook.limitedLoginToken(request)
                api.stack.secrets.add(forged.value)
                let refused = try await Self.register(api, writer, ["account_reference": "ll-forged-\(index)", "id_token": forged.value])
                #expect(refused.status == 422 && refused.json["field"] as? String == "id_token", "\(name): \(refused.text)")
            }
            #expect(
                try await AccountDeletionAPITests.count(api, "SELECT count(*)::int FROM revoker.grants WHERE account_reference LIKE 'll-forged-%'")
                    == 0
            )
            // Another app's genuine token, registered for this app.
            let theirs = try await facebook.limitedLoginToken(Token(appID: Self.otherApp, subject: "3003"))
            api.stack.secrets.add(theirs.value)
            let foreign = try await Self.register(api, writer, ["account_reference": "ll-2", "id_token": theirs.value])
            #expect(foreign.status == 422 && foreign.json["field"] as? String == "id_token", "\(foreign.text)")
        }
    }

    /// Deleting the account ends every Facebook grant exactly once by the sandbox's count, two
    /// months on (the person's access token has expired; the Limited Login token long before),
    /// beside the account's Apple and Google grants.
    @Test func deletingTheAccountEndsEveryFacebookGrantOnceBesideApplesAndGooglesMonthsLater() async throws {
        try await Self.with { api, writer, _ in
            let facebook = FacebookDeauthorizeAPITests.sandbox(api)
            let classic = try await facebook.signIn(appID: Self.app, userID: "4001")
            let limited = try await facebook.limitedLoginToken(Token(appID: Self.app, subject: "4003"))
            let otherApp = try await facebook.signIn(appID: Self.otherApp, userID: "4002")
            let bystander = try await facebook.signIn(appID: Self.app, userID: "4009")
            for secret in [classic.value, limited.value, otherApp.value, bystander.value] { api.stack.secrets.add(secret) }
            for (reference, fields) in [
                ("acct", ["access_token": classic.value]), ("acct", ["id_token": limited.value]),
                ("acct", ["access_token": otherApp.value, "client_id": Self.otherApp]), ("bystander", ["access_token": bystander.value]),
            ] {
                let held = try await Self.register(api, writer, ["account_reference": reference].merging(fields) { $1 })
                #expect(held.status == 201, "\(held.text)")
            }
            let apple = try await AccountDeletionAPITests.hold(api, writer: writer, account: "acct", apple: "apple-4001")
            let google = try await api.stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "google-4001"))
            api.stack.secrets.add(google.value)
            let googleHeld = try await api.call(
                .POST,
                "/v1/grants",
                key: writer,
                json: ["provider": "google", "client_id": Self.web, "account_reference": "acct", "authorization_code": google.value]
            )
            #expect(googleHeld.status == 201, "\(googleHeld.text)")

            try await facebook.advanceClock(by: 61 * 86_400)
            let asked = try await api.call(.POST, "/v1/accounts/acct/deletion", key: api.keys.writer, contentType: nil)
            #expect(asked.status == 202 || asked.status == 201, "\(asked.text)")
            let id = try #require(asked.json["id"] as? String)
            let done = try await AccountDeletionAPITests.deletion(api, id)
            #expect(done.json["outcome"] as? String == "revoked", "\(done.text)")

            for grant in [classic.grantID, limited.grantID, otherApp.grantID] {
                let report = try await facebook.grant(grant)
                #expect(report.revoked && report.revocations == 1 && report.revokeCalls == 1, "\(report)")
            }
            #expect(try await facebook.grant(bystander.grantID).revoked == false, "another account's grant is left alone")
            #expect(try await api.stack.sandbox.admin.grant(apple.sandbox).revocations == 1)
            #expect(try await api.stack.sandbox.google.grant(google.grantID).revocations == 1)
            let audit = try await api.stack.audit()
            #expect(audit.contains { $0.externalReference == "acct" && $0.event == "revoked" && $0.providerEndpoint == "/platform/uninstall/" })
            #expect(audit.contains { $0.externalReference == "acct" && $0.event == "revoked" && $0.providerEndpoint == "/permissions" })
        }
    }
}
