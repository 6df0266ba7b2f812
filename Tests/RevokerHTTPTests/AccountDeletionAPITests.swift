import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerEvidence
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// `POST /v1/accounts/{reference}/deletion`: an account deleted by its reference alone, every
/// grant held for it revoked once, against the Apple and Google sandboxes over real HTTP with a
/// worker running.
@Suite("HTTP API: account deletion")
struct AccountDeletionAPITests {
    static let notes = GrantCustodyAPITests.notes
    static let web = GrantCustodyAPITests.web

    /// Registers a grant (a code, exchanged at once) and returns its id once held.
    static func hold(_ api: APIHarness, writer: String, account: String, apple subject: String) async throws -> (grant: String, sandbox: String) {
        let code = try await api.stack.sandbox.admin.mintCode(clientID: notes, subject: subject)
        api.stack.secrets.add(code.value)
        let held = try await api.call(
            .POST,
            "/v1/grants",
            key: writer,
            json: ["client_id": notes, "account_reference": account, "authorization_code": code.value]
        )
        #expect(held.status == 201, "\(held.text)")
        return (try #require(held.json["id"] as? String), code.grantID)
    }

    static func deletion(_ api: APIHarness, _ id: String, state: String = "completed") async throws -> APIHarness.Answer {
        try await eventuallyValue("deletion \(id) \(state)") {
            let shown = try await api.call(.GET, "/v1/deletions/\(id)", key: api.keys.reader)
            return shown.json["state"] as? String == state ? shown : nil
        }
    }

    static func count(_ api: APIHarness, _ sql: String) async throws -> Int {
        try await api.stack.database.client.query(PostgresQuery(unsafeSQL: sql)).collect().first?.decode(Int.self) ?? -1
    }

    @Test func deletingAnAccountRevokesEveryHeldGrantOnceAcrossProviders() async throws {
        try await GrantCustodyAPITests.with { api, writer, _ in
            let first = try await Self.hold(api, writer: writer, account: "user-1", apple: "apple-user-1")
            let (appleToken, appleTokenGrant) = try await {
                let minted = try await api.mintRefreshToken(subject: "apple-user-1")
                return (minted.token, minted.grantID)
            }()
            let token = try await api.call(
                .POST,
                "/v1/grants",
                key: writer,
                json: ["client_id": Self.notes, "account_reference": "user-1", "refresh_token": appleToken, "user_id": "apple-user-1"]
            )
            #expect(token.status == 201, "\(token.text)")
            let google = try await api.stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "google-user-1"))
            api.stack.secrets.add(google.value)
            let googleHeld = try await api.call(
                .POST,
                "/v1/grants",
                key: writer,
                json: ["provider": "google", "client_id": Self.web, "account_reference": "user-1", "authorization_code": google.value]
            )
            #expect(googleHeld.status == 201, "\(googleHeld.text)")
            let other = try await Self.hold(api, writer: writer, account: "user-2", apple: "apple-user-2")

            // Slow answers, so that the deletion is still running when it is asked again.
            try await api.stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 400))
            let asked = try await api.call(.POST, "/v1/accounts/user-1/deletion", key: api.keys.writer, contentType: nil)
            #expect(asked.status == 202, "\(asked.text)")
            let id = try #require(asked.json["id"] as? String)
            #expect((asked.json["grants"] as? [[String: Any]])?.count == 3, "\(asked.text)")
            let again = try await api.call(.POST, "/v1/accounts/user-1/deletion", key: api.keys.writer, json: [:])
            #expect(again.status == 200 && again.json["id"] as? String == id, "asking again while it runs finds it: \(again.text)")

            let done = try await Self.deletion(api, id)
            #expect(done.json["outcome"] as? String == "revoked", "\(done.text)")
            let grants = try #require(done.json["grants"] as? [[String: Any]])
            #expect(grants.map { $0["state"] as? String } == ["revoked", "revoked", "revoked"], "\(done.text)")
            #expect(grants.map { $0["outcome"] as? String } == ["revoked", "revoked", "revoked"])
            #expect(Set(grants.map { $0["provider"] as? String }) == ["apple", "google"])

            for sandboxGrant in [first.sandbox, appleTokenGrant] {
                let report = try await api.stack.sandbox.admin.grant(sandboxGrant)
                #expect(report.revokeCalls == 1 && report.revoked, "revoked exactly once: \(report)")
            }
            let googleReport = try await api.stack.sandbox.google.grant(google.grantID)
            #expect(googleReport.revokeCalls == 1 && googleReport.revoked, "\(googleReport)")
            let untouched = try await api.stack.sandbox.admin.grant(other.sandbox)
            #expect(untouched.revokeCalls == 0 && !untouched.revoked, "another account's grant is left alone")

            #expect(
                try await Self.count(api, "SELECT count(*)::int FROM revoker.grants WHERE account_reference = 'user-1' AND sealed_token IS NOT NULL")
                    == 0,
                "a revoked grant keeps no token"
            )
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.grants WHERE state = 'held'") == 1)
            let metrics = try await api.call(.GET, "/metrics", key: nil).text
            for line in [
                #"revoker_grants{provider="apple",state="revoked"} 2"#, #"revoker_grants{provider="google",state="revoked"} 1"#,
                #"revoker_grants{provider="apple",state="held"} 1"#, #"revoker_grants{provider="google",state="held"} 0"#,
                "revoker_account_deletions_pending 0",
            ] {
                #expect(metrics.contains(line), "\(line) in \(metrics)")
            }

            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 10)
            let completed = events.filter { $0["type"] as? String == "account.deletion_completed" }
            #expect(Set(completed.map(\.["client_id"]).compactMap { $0 as? String }) == [Self.notes, Self.web], "one event per app")
            for event in completed {
                let data = AppleNotificationsAPITests.data(event)
                let deletion = try #require(data["deletion"] as? [String: Any], "\(event)")
                #expect(deletion["id"] as? String == id && deletion["outcome"] as? String == "revoked")
                let fates = try #require(deletion["grants"] as? [[String: Any]])
                #expect(fates.allSatisfy { $0["client_id"] as? String == event["client_id"] as? String }, "an app hears of its own grants")
                #expect(fates.allSatisfy { $0["outcome"] as? String == "revoked" })
            }
            #expect(events.contains { $0["type"] as? String == "account.deletion_requested" })

            let trail = try await api.stack.audit().filter { $0.requestID?.uuidString.lowercased() == id }.map(\.event)
            #expect(trail.first == "deletion_requested" && trail.last == "deletion_completed", "\(trail)")
            #expect(trail.filter { $0 == "deletion_grant" }.count == 3 && trail.filter { $0 == "grant_ended" }.count == 3, "\(trail)")

            // The whole account's signed receipt verifies offline; a key that does not reach every
            // app it names does not get it, nor does anyone a receipt of a deletion that is not there.
            let receipt = try await api.call(.GET, "/v1/deletions/\(id)/receipt", key: api.keys.auditor)
            #expect(receipt.status == 200, "\(receipt.text)")
            let key = try AuditSigningKey(pemRepresentation: String(contentsOfFile: api.stack.files.auditSigningKeyFile, encoding: .utf8))
            let verified = AccountReceipt.verify(Data(receipt.text.utf8), keys: [key.publicKey])
            #expect(verified.valid, "\(verified.problems)")
            #expect(verified.receipt?.summary.grants.count == 3 && verified.receipt?.summary.outcome == "revoked")
            #expect(verified.receipt?.requests.count == 6, "each grant's hold and revocation")
            let limited = try await api.call(.GET, "/v1/deletions/\(id)/receipt", key: api.keys.notesOnly)
            #expect(limited.status == 404, "the receipt names the Google app too: \(limited.text)")
            let unknown = try await api.call(.GET, "/v1/deletions/\(UUID().uuidString)/receipt", key: api.keys.auditor)
            #expect(unknown.status == 404, "\(unknown.text)")

            let later = try await api.call(.POST, "/v1/accounts/user-1/deletion", key: api.keys.writer, json: [:])
            #expect(later.status == 201, "a deletion of an account with nothing left ends at once: \(later.text)")
            #expect(later.json["outcome"] as? String == "nothing_held")
            let listed = try await api.call(.GET, "/v1/accounts/user-1/deletions", key: api.keys.reader)
            #expect((listed.json["deletions"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["nothing_held", "revoked"])
            try await api.stack.expectNoSecretsInAudit()
            try api.stack.expectNoSecretsInLogs()
        }
    }

    @Test func anAccountWithNothingHeldIsATruthfulAnswerAndACredentialCoversAGrantNeverSeen() async throws {
        try await GrantCustodyAPITests.with { api, _, _ in
            let nothing = try await api.call(.POST, "/v1/accounts/nobody%2Fhere/deletion", key: api.keys.notesOnly, contentType: nil)
            #expect(nothing.status == 201, "\(nothing.text)")
            #expect(nothing.json["account_reference"] as? String == "nobody/here", "the path's reference is percent-decoded")
            #expect(nothing.json["outcome"] as? String == "nothing_held" && nothing.json["state"] as? String == "completed")
            #expect(nothing.json["client_ids"] as? [String] == [Self.notes], "a key limited to an app deletes within it")
            let events = try await AppleNotificationsAPITests.feed(api, key: api.keys.admin, count: 2)
            let told = events.filter { $0["type"] as? String == "account.deletion_completed" }
            #expect(told.map { $0["client_id"] as? String } == [Self.notes], "told to the app it covered: \(told)")

            let (sandboxGrant, token) = try await api.mintRefreshToken(subject: "apple-user-3")
            let carried = try await api.call(
                .POST,
                "/v1/accounts/user-3/deletion",
                key: api.keys.writer,
                json: ["credential": ["client_id": Self.notes, "refresh_token": token, "user_id": "apple-user-3"]]
            )
            #expect(carried.status == 202, "\(carried.text)")
            let id = try #require(carried.json["id"] as? String)
            let done = try await Self.deletion(api, id)
            #expect(done.json["outcome"] as? String == "revoked", "\(done.text)")
            let requests = try #require(done.json["requests"] as? [[String: Any]])
            #expect(requests.count == 1 && requests.first?["outcome"] as? String == "revoked" && requests.first?["grant_id"] is NSNull)
            #expect(try await api.stack.sandbox.admin.grant(sandboxGrant).revokeCalls == 1)

            let limited = try await api.call(
                .POST,
                "/v1/accounts/user-4/deletion",
                key: api.keys.notesOnly,
                json: ["client_ids": [Self.web]]
            )
            #expect(limited.status == 403, "a key limited to one app cannot delete in another: \(limited.text)")
            let badBody = try await api.call(.POST, "/v1/accounts/user-4/deletion", key: api.keys.writer, json: ["client_ids": []])
            #expect(badBody.status == 422 && badBody.json["field"] as? String == "client_ids", "\(badBody.text)")
            let unknown = try await api.call(.POST, "/v1/accounts/user-4/deletion", key: api.keys.writer, json: ["whom": "x"])
            #expect(unknown.status == 400, "\(unknown.text)")
            // 256 code points that Swift counts as one character: refused as the OpenAPI
            // document's maxLength (and PostgreSQL's char_length) count.
            let marks = "e" + String(repeating: "%CC%81", count: 255)
            let listedLong = try await api.call(.GET, "/v1/accounts/\(marks)/deletions", key: api.keys.reader)
            #expect(listedLong.status == 400 && listedLong.json["field"] as? String == "reference", "\(listedLong.text)")
            let deletedLong = try await api.call(.POST, "/v1/accounts/\(marks)/deletion", key: api.keys.writer, json: [:])
            #expect(deletedLong.status == 400 && deletedLong.json["field"] as? String == "reference", "\(deletedLong.text)")
            #expect(try await api.call(.POST, "/v1/accounts/user-4/deletion", key: api.keys.reader, json: [:]).status == 403)
            #expect(try await api.call(.GET, "/v1/deletions/\(UUID())", key: api.keys.reader).status == 404)
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.account_deletions WHERE account_reference = 'user-4'") == 0)
        }
    }

    /// `revoker.request_account_deletion` inside the app's own transaction: a rollback leaves
    /// nothing; a commit revokes what is held.
    @Test func theSQLFunctionDeletesInsideTheAppsOwnTransaction() async throws {
        try await GrantCustodyAPITests.with { api, writer, _ in
            let held = try await Self.hold(api, writer: writer, account: "user-5", apple: "apple-user-5")
            let database = api.stack.database.client
            let before = try await Self.count(api, "SELECT count(*)::int FROM revoker.audit_events")
            struct RolledBack: Error {}
            await #expect(throws: PostgresTransactionError.self) {
                try await database.withTransaction(logger: api.stack.logger) { connection in
                    _ = try await connection.query("SELECT revoker.request_account_deletion('user-5')", logger: api.stack.logger).collect()
                    throw RolledBack()
                }
            }
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.account_deletions") == 0)
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.revocation_requests WHERE purpose = 'revoke'") == 0)
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.audit_events") == before)
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.grants WHERE state = 'held'") == 1)

            let rows = try await database.query("SELECT revoker.request_account_deletion('user-5')").collect()
            let id = try #require(try rows.first?.decode(UUID.self))
            let done = try await Self.deletion(api, id.uuidString.lowercased())
            #expect(done.json["outcome"] as? String == "revoked", "\(done.text)")
            #expect(done.json["requested_by"] as? String == "sql:" + (try await Self.role(api)))
            #expect(try await api.stack.sandbox.admin.grant(held.sandbox).revokeCalls == 1)
        }
    }

    /// Apple's consent-revoked and Google's tokens-revoked end the user's held grants at once:
    /// dead, their tokens erased, nothing left for a deletion to call about.
    @Test func theProvidersWordThatAUsersGrantsAreGoneEndsTheirHeldGrants() async throws {
        try await GrantCustodyAPITests.with { api, writer, reader in
            let (appleGrant, appleToken) = try await api.mintRefreshToken(subject: "apple-user-6")
            let google = try await api.stack.sandbox.google.mintRefreshToken(clientID: Self.web, subject: "google-user-6")
            api.stack.secrets.add(google.value)
            let (_, keptToken) = try await api.mintRefreshToken(subject: "apple-user-7")
            var ids: [String] = []
            for body: [String: Any] in [
                ["client_id": Self.notes, "account_reference": "user-6", "refresh_token": appleToken, "user_id": "apple-user-6"],
                [
                    "provider": "google", "client_id": Self.web, "account_reference": "user-6", "refresh_token": google.value,
                    "user_id": "google-user-6",
                ],
                ["client_id": Self.notes, "account_reference": "user-7", "refresh_token": keptToken, "user_id": "apple-user-7"],
            ] {
                let held = try await api.call(.POST, "/v1/grants", key: writer, json: body)
                #expect(held.status == 201, "\(held.text)")
                ids.append(try #require(held.json["id"] as? String))
            }

            let consent = try await AppleNotificationsAPITests.notify(api, "consent-revoked", subject: "apple-user-6")
            #expect(consent.status == 200, "\(consent.body)")
            let risc = try await api.stack.sandbox.google.sendSecurityEvent(
                .init(url: api.baseURL + "/v1/google/risc", audience: Self.web, subject: "google-user-6", type: "tokens-revoked")
            )
            #expect(risc.status == 202, "\(risc.body)")

            for (id, reason) in [(ids[0], "consent-revoked"), (ids[1], "tokens-revoked")] {
                let shown = try await api.call(.GET, "/v1/grants/\(id)", key: reader)
                #expect(shown.json["state"] as? String == "dead" && shown.json["end_reason"] as? String == reason, "\(shown.text)")
            }
            let kept = try await api.call(.GET, "/v1/grants/\(ids[2])", key: reader)
            #expect(kept.json["state"] as? String == "held", "another user's grant is left alone: \(kept.text)")
            #expect(
                try await Self.count(api, "SELECT count(*)::int FROM revoker.grants WHERE account_reference = 'user-6' AND sealed_token IS NOT NULL")
                    == 0,
                "the tokens are erased at once"
            )
            let trail = try await api.stack.audit().filter { $0.externalReference == "user-6" }.map(\.event)
            #expect(trail.filter { $0 == "grant_ended" }.count == 2, "\(trail)")

            let deletion = try await api.call(.POST, "/v1/accounts/user-6/deletion", key: api.keys.writer, json: [:])
            #expect(deletion.status == 201 && deletion.json["outcome"] as? String == "nothing_held", "\(deletion.text)")
            #expect(try await api.stack.sandbox.admin.grant(appleGrant).calls.isEmpty, "nothing called at Apple")
            #expect(try await api.stack.sandbox.google.grant(google.grantID).revokeCalls == 0)
        }
    }

    static func role(_ api: APIHarness) async throws -> String {
        try await api.stack.database.client.query("SELECT session_user::text").collect().first?.decode(String.self) ?? ""
    }
}
