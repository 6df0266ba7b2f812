import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// `POST /v1/grants`: a grant handed over at sign-in is taken into custody, a code exchanged at
/// once, against the Apple and Google sandboxes over real HTTP with a worker running.
@Suite("HTTP API: grant custody")
struct GrantCustodyAPITests {
    static let notes = "com.example.notes"
    static let web = GoogleSecurityEventsAPITests.web

    /// Long enough that a loaded machine still answers within it: these tests are about what
    /// the answer says, not how soon (one test shortens it to see the 202).
    static func with<T: Sendable>(
        http: [String: any Sendable] = ["grant_exchange_wait_seconds": 30],
        _ body: (APIHarness, _ writer: String, _ reader: String) async throws -> T
    ) async throws -> T {
        let (writer, reader) = (APIHarness.Keys.make(), APIHarness.Keys.make())
        let extra: [[String: any Sendable]] = [
            ["name": "grants-writer", "sha256": APIHarness.Keys.hash(writer), "scopes": ["grants:write"]],
            ["name": "grants-reader", "sha256": APIHarness.Keys.hash(reader), "scopes": ["grants:read"]],
        ]
        // One test moves the sandbox's clock five minutes on: the client secrets, signed by the
        // real clock, must still be valid there.
        let worker: [String: any Sendable] = [
            "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "client_secret_lifetime_seconds": 3600,
        ]
        return try await APIHarness.with(runWorker: true, worker: worker, http: http, apps: [.google: [web]], extraKeys: extra) { api in
            try await body(api, writer, reader)
        }
    }

    @Test func aCodeRegisteredAtSignInIsExchangedAtOnceAndHeldUnderTheAccount() async throws {
        try await Self.with { api, writer, reader in
            let apple = try await api.stack.sandbox.admin.mintCode(clientID: Self.notes, subject: "apple-user-1")
            let google = try await api.stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "google-user-1"))
            api.stack.secrets.add(apple.value)
            api.stack.secrets.add(google.value)

            let body: [String: Any] = ["client_id": Self.notes, "account_reference": "account-1", "authorization_code": apple.value]
            let held = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(held.status == 201, "\(held.text)")
            #expect(held.json["state"] as? String == "held")
            #expect(held.json["provider"] as? String == "apple")
            #expect(held.json["user_id"] as? String == "apple-user-1", "bound to the sub of the identity token that came back")
            #expect(held.json["user_source"] as? String == "verified_id_token")
            #expect(held.json["registered_kind"] as? String == "authorization_code")
            let id = try #require(held.json["id"] as? String)

            let again = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(again.status == 200, "the same code again is the same grant: \(again.text)")
            #expect(again.json["id"] as? String == id)

            let googleBody: [String: Any] = [
                "provider": "google", "client_id": Self.web, "account_reference": "account-1", "authorization_code": google.value,
            ]
            let googleHeld = try await api.call(.POST, "/v1/grants", key: writer, json: googleBody)
            #expect(googleHeld.status == 201, "\(googleHeld.text)")
            #expect(googleHeld.json["user_id"] as? String == "google-user-1")

            let appleReport = try await api.stack.sandbox.admin.grant(apple.grantID)
            #expect(appleReport.codeExchanges == 1 && appleReport.revokeCalls == 0, "exchanged once, not revoked")
            let googleReport = try await api.stack.sandbox.google.grant(google.grantID)
            #expect(googleReport.codeExchanges == 1 && googleReport.revokeCalls == 0)

            let listed = try await api.call(.GET, "/v1/grants?account_reference=account-1", key: reader)
            let grants = try #require(listed.json["grants"] as? [[String: Any]], "\(listed.text)")
            #expect(grants.map { $0["provider"] as? String } == ["apple", "google"])
            #expect(grants.allSatisfy { $0["state"] as? String == "held" })
            let shown = try await api.call(.GET, "/v1/grants/\(id)", key: reader)
            #expect(shown.json["account_reference"] as? String == "account-1")
            #expect(try await api.call(.GET, "/v1/grants/\(UUID())", key: reader).status == 404)
            #expect(try await api.call(.POST, "/v1/grants", key: reader, json: body).status == 403, "reading is not registering")
            #expect(try await api.call(.POST, "/v1/grants", key: api.keys.writer, json: body).status == 403, "enqueueing is not registering")

            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 2)
            let grantEvents = events.filter { $0["type"] as? String == "grant.held" }
            #expect(Set(grantEvents.map { AppleNotificationsAPITests.data($0)["grant_id"] as? String }).contains(id))

            let trail = try await api.stack.audit().filter { $0.externalReference == "account-1" }.map(\.event)
            for step in ["grant_registered", "exchange_started", "token_exchanged", "id_token_verified", "grant_held", "credential_erased"] {
                #expect(trail.contains(step), "the trail says \(step): \(trail)")
            }
            #expect(!trail.contains("revoked"))
            let tokens = try await api.stack.database.client.query(
                "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL AND token_key_id IS NOT NULL"
            ).collect()
            #expect(try tokens.first?.decode(Int.self) == 2, "both refresh tokens are sealed in custody")
            try await api.stack.expectNoSecretsInAudit()
            try api.stack.expectNoSecretsInLogs()
            for answer in [held, again, googleHeld, listed, shown] { try api.stack.expectNoSecrets(in: answer.text) }
        }
    }

    @Test func aRefreshTokenIsHeldOnceTheProviderProvedItLiveBoundToTheUserItsAnswerNames() async throws {
        try await Self.with { api, writer, _ in
            let (grantID, token) = try await api.mintRefreshToken(subject: "apple-user-2")
            let body: [String: Any] = [
                "client_id": Self.notes, "account_reference": "account-2", "refresh_token": token, "user_id": "apple-user-2",
            ]
            let held = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(held.status == 201, "\(held.text)")
            #expect(held.json["state"] as? String == "held")
            #expect(held.json["user_source"] as? String == "verified_id_token", "proven by Apple's answer, not by the backend's word")
            let report = try await api.stack.sandbox.admin.grant(grantID)
            #expect(report.validations == 1 && report.revokeCalls == 0, "validated once, not revoked")
            // The backend hears of it as of an exchanged code.
            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 1)
            let told = events.filter { $0["type"] as? String == "grant.held" }.map { AppleNotificationsAPITests.data($0)["grant_id"] as? String }
            #expect(told == [held.json["id"] as? String], "\(events)")

            var other = body
            other["account_reference"] = "account-3"
            let conflict = try await api.call(.POST, "/v1/grants", key: writer, json: other)
            #expect(conflict.status == 409, "\(conflict.text)")

            var both = body
            both["authorization_code"] = "c.also"
            let two = try await api.call(.POST, "/v1/grants", key: writer, json: both)
            #expect(two.status == 422 && two.json["field"] as? String == "refresh_token", "\(two.text)")
            var redirect = body
            redirect["redirect_uri"] = "https://example.com/callback"
            let misplaced = try await api.call(.POST, "/v1/grants", key: writer, json: redirect)
            #expect(misplaced.status == 422 && misplaced.json["field"] as? String == "redirect_uri", "\(misplaced.text)")
            var unknown = body
            unknown["client_id"] = "com.example.unknown"
            let refused = try await api.call(.POST, "/v1/grants", key: writer, json: unknown)
            #expect(refused.status == 422 && refused.json["field"] as? String == "client_id", "\(refused.text)")
            for answer in [held, conflict, two, misplaced, refused] { try api.stack.expectNoSecrets(in: answer.text) }
            let grants = try await api.stack.database.client.query("SELECT count(*)::int FROM revoker.grants").collect()
            #expect(try grants.first?.decode(Int.self) == 1, "refusals store nothing")
        }
    }

    /// User B's refresh token handed over with user A's identity token: the identity token proves
    /// who signed in, not whose token this is. Apple's answer names B, so nothing is held for A,
    /// and a message about A cannot erase B's live token.
    @Test func aRefreshTokenIsNotBoundToTheUserAnotherIdentityTokenNames() async throws {
        try await Self.with { api, writer, _ in
            let (grantB, tokenB) = try await api.mintRefreshToken(subject: "apple-user-b")
            let identityA = try await api.stack.sandbox.admin.mintIdentityToken(.init(subject: "apple-user-a", audience: Self.notes))
            api.stack.secrets.add(identityA)
            let body: [String: Any] = [
                "client_id": Self.notes, "account_reference": "account-a", "refresh_token": tokenB, "id_token": identityA,
            ]
            let refused = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(refused.status == 422, "\(refused.text)")
            #expect(refused.json["end_reason"] as? String == "subject_mismatch")
            #expect(refused.json["state"] as? String == "failed")
            try api.stack.expectNoSecrets(in: refused.text)
            // Apple says A revoked consent: nothing of B's is touched.
            #expect(try await AppleNotificationsAPITests.notify(api, "consent-revoked", subject: "apple-user-a").status == 200)
            let report = try await api.stack.sandbox.admin.grant(grantB)
            #expect(report.validations == 1 && report.revokeCalls == 0 && !report.revoked, "B's grant is B's: validated once, never revoked")
            let sealed = try await api.stack.database.client.query("SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL")
                .collect()
            #expect(try sealed.first?.decode(Int.self) == 0, "nothing is held under the wrong account")
        }
    }

    /// A Google grant whose refresh brings no identity token (no `openid` scope) is held with the
    /// user the backend stated, unproven. Here the token is B's, stated as A's: when Google says
    /// A's tokens are revoked, B's token is revoked at Google rather than erased unheard.
    @Test func aGrantWhoseUserWasOnlyStatedIsRevokedNotErasedWhenAMessageNamesThatUser() async throws {
        try await Self.with { api, writer, reader in
            let minted = try await api.stack.sandbox.google.mintRefreshToken(clientID: Self.web, subject: "google-user-b", openID: false)
            api.stack.secrets.add(minted.value)
            let body: [String: Any] = [
                "provider": "google", "client_id": Self.web, "account_reference": "account-9", "refresh_token": minted.value,
                "user_id": "google-user-a",
            ]
            let held = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(held.status == 201, "\(held.text)")
            #expect(held.json["state"] as? String == "held" && held.json["user_source"] as? String == "stated", "\(held.text)")
            let url = api.baseURL + "/v1/google/risc"
            let sent = try await api.stack.sandbox.google.sendSecurityEvent(
                .init(url: url, audience: Self.web, subject: "google-user-a", type: "tokens-revoked")
            )
            #expect(sent.status == 202, "\(sent.body)")
            let id = try #require(held.json["id"] as? String)
            let ended = try await eventuallyValue("the grant revoked") {
                let grant = try await api.call(.GET, "/v1/grants/\(id)", key: reader)
                return ["revoked", "dead"].contains(grant.json["state"] as? String) ? grant : nil
            }
            #expect(ended.json["state"] as? String == "revoked", "\(ended.text)")
            #expect(try await api.stack.sandbox.google.grant(minted.grantID).revocations == 1, "revoked at Google, not only erased here")
        }
    }

    /// A code the provider refuses is reported truthfully, never dropped: a code of another user
    /// than the one named, and a code older than five minutes (the sandbox's clock moved on).
    @Test func aRefusedCodeIsReportedTruthfully() async throws {
        try await Self.with { api, writer, reader in
            let someone = try await api.stack.sandbox.admin.mintCode(clientID: Self.notes, subject: "apple-user-5")
            api.stack.secrets.add(someone.value)
            let named: [String: Any] = [
                "client_id": Self.notes, "account_reference": "account-5", "authorization_code": someone.value, "user_id": "apple-user-6",
            ]
            let mismatch = try await api.call(.POST, "/v1/grants", key: writer, json: named)
            #expect(mismatch.status == 422, "\(mismatch.text)")
            #expect(mismatch.json["end_reason"] as? String == "subject_mismatch")
            // Signed in five minutes and a second ago, by the sandbox's clock.
            let expired = try await api.stack.sandbox.admin.mintCode(clientID: Self.notes, subject: "apple-user-4")
            api.stack.secrets.add(expired.value)
            try await api.stack.sandbox.admin.advanceClock(by: 301)
            let body: [String: Any] = ["client_id": Self.notes, "account_reference": "account-4", "authorization_code": expired.value]
            let refused = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(refused.status == 422, "\(refused.text)")
            #expect(refused.json["state"] as? String == "failed")
            #expect(refused.json["end_reason"] as? String == "code_rejected")
            #expect(refused.json["error_code"] as? String == "invalid_grant")

            let listed = try await api.call(.GET, "/v1/grants?account_reference=account-5", key: reader)
            #expect((listed.json["grants"] as? [[String: Any]])?.first?["state"] as? String == "failed")
            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 2)
            let failed = events.filter { $0["type"] as? String == "grant.failed" }.map { AppleNotificationsAPITests.data($0)["outcome"] as? String }
            #expect(Set(failed) == ["code_rejected", "subject_mismatch"])
            let held = try await api.stack.database.client.query("SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL").collect()
            #expect(try held.first?.decode(Int.self) == 0)
        }
    }

    /// When the provider is slower than the wait, the answer is 202 and the exchange goes on.
    @Test func aSlowExchangeAnswers202AndTheGrantIsHeldLater() async throws {
        try await Self.with(http: ["grant_exchange_wait_seconds": 0.2]) { api, writer, reader in
            try await api.stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 1500))
            let code = try await api.stack.sandbox.admin.mintCode(clientID: Self.notes, subject: "apple-user-7")
            api.stack.secrets.add(code.value)
            let body: [String: Any] = ["client_id": Self.notes, "account_reference": "account-7", "authorization_code": code.value]
            let accepted = try await api.call(.POST, "/v1/grants", key: writer, json: body)
            #expect(accepted.status == 202, "\(accepted.text)")
            #expect(accepted.json["state"] as? String == "pending")
            let id = try #require(accepted.json["id"] as? String)
            let held = try await eventuallyValue("the grant held") {
                let shown = try await api.call(.GET, "/v1/grants/\(id)", key: reader)
                return shown.json["state"] as? String == "held" ? shown : nil
            }
            #expect(held.json["user_id"] as? String == "apple-user-7")
            #expect(try await api.stack.sandbox.admin.grant(code.grantID).codeExchanges == 1)
        }
    }

    /// `revoker.register_grant` inside the app's own transaction: a rollback leaves nothing; a
    /// commit hands the code (or token) to a worker, which exchanges (or seals) it.
    @Test func theSQLFunctionRegistersInsideTheAppsOwnTransaction() async throws {
        try await Self.with { api, _, reader in
            let database = api.stack.database.client
            let (_, token) = try await api.mintRefreshToken(subject: "apple-user-8")
            struct RolledBack: Error {}
            await #expect(throws: PostgresTransactionError.self) {
                try await database.withTransaction(logger: api.stack.logger) { connection in
                    _ = try await connection.query(
                        "SELECT revoker.register_grant('apple', \(Self.notes), 'account-8', 'refresh_token', \(token))",
                        logger: api.stack.logger
                    ).collect()
                    throw RolledBack()
                }
            }
            for table in ["grants", "revocation_requests", "credential_intake", "audit_events"] {
                let rows = try await database.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM revoker.\(table)")).collect()
                #expect(try rows.first?.decode(Int.self) == 0, "a rolled-back registration leaves nothing in \(table)")
            }

            let code = try await api.stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "google-user-8"))
            api.stack.secrets.add(code.value)
            var ids: [UUID] = []
            for (provider, clientID, kind, secret) in [
                ("apple", Self.notes, "refresh_token", token), ("google", Self.web, "authorization_code", code.value),
            ] {
                let rows = try await database.query(
                    "SELECT revoker.register_grant(\(provider), \(clientID), 'account-8', \(kind), \(secret))"
                ).collect()
                ids.append(try #require(try rows.first?.decode(UUID.self)))
            }
            let again = try await database.query(
                "SELECT revoker.register_grant('apple', \(Self.notes), 'account-8', 'refresh_token', \(token))"
            ).collect()
            #expect(try again.first?.decode(UUID.self) == ids[0], "registering again returns the same grant")
            for id in ids {
                let held = try await eventuallyValue("grant \(id) held") {
                    let shown = try await api.call(.GET, "/v1/grants/\(id.uuidString.lowercased())", key: reader)
                    return shown.json["state"] as? String == "held" ? shown : nil
                }
                #expect(held.json["account_reference"] as? String == "account-8")
            }
            #expect(try await api.stack.sandbox.google.grant(code.grantID).codeExchanges == 1)
            let intake = try await database.query("SELECT count(*)::int FROM revoker.credential_intake").collect()
            #expect(try intake.first?.decode(Int.self) == 0, "the intake is emptied once the worker sealed what it held")
            let wrongProvider = await #expect(throws: PSQLError.self) {
                _ = try await database.query(
                    "SELECT revoker.register_grant('google', \(Self.notes), 'account-9', 'refresh_token', 'r.other')"
                ).collect()
            }
            #expect(wrongProvider?.serverInfo?[.message]?.contains("provider and client_id") == true)
            try await api.stack.expectNoSecretsInAudit()
        }
    }
}
