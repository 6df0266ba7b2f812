import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerEvidence
import RevokerLocalStack
import RevokerProvider
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
            let report = try await api.stack.sandbox.admin.grant(appleGrant)
            #expect(report.validations == 1 && report.revokeCalls == 0, "validated once when registered; nothing called since")
            #expect(try await api.stack.sandbox.google.grant(google.grantID).revokeCalls == 0)
        }
    }

    static func role(_ api: APIHarness) async throws -> String {
        try await api.stack.database.client.query("SELECT session_user::text").collect().first?.decode(String.self) ?? ""
    }

    // MARK: Any size, each app its own

    /// The state of deletion `id`, read straight from its row: polling the API would read its
    /// thousands of grants each time.
    static func settled(_ api: APIHarness, deletion id: String) async throws -> String? {
        try await eventuallyValue("deletion \(id) completed", timeout: .seconds(600), every: .milliseconds(250)) {
            let rows = try await api.stack.database.client.query(
                "SELECT outcome FROM revoker.account_deletions WHERE id = \(try #require(UUID(uuidString: id))) AND state = 'completed'"
            ).collect()
            return try rows.first.map { try $0.decode(String?.self) }
        }
    }

    /// 1,200 grants: asked for in one transaction that grew with the account (2.5 ms a grant),
    /// the deletion was refused once the account outgrew the API's database deadline. It is
    /// accepted under the default deadline with one bounded batch of requests made in its
    /// transaction, the workers make the rest, and every grant is revoked exactly once. How long
    /// the answer took is measured, not asserted (on two busy cores it varies threefold):
    /// `REVOKER_LARGE_ACCOUNT_GRANTS` and `REVOKER_LARGE_ACCOUNT_DEADLINE_SECONDS` set another
    /// count and deadline (docs/benchmarks.md, "An account of 10,000 grants").
    @Test func anAccountOfManyGrantsIsAcceptedAtOnceAndEveryGrantRevokedExactlyOnce() async throws {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["REVOKER_LARGE_ACCOUNT_GRANTS"].flatMap { Int($0) } ?? 1_200
        var http: [String: any Sendable] = ["grant_exchange_wait_seconds": 30]
        http["database_timeout_seconds"] = environment["REVOKER_LARGE_ACCOUNT_DEADLINE_SECONDS"].flatMap { Int($0) }
        try await GrantCustodyAPITests.with(http: http) { api, _, _ in
            let grants = Set(try await api.stack.holdMany(clientID: Self.notes, accountReference: "big-account", count: count))
            let clock = ContinuousClock()
            let started = clock.now
            let asked = try await api.call(.POST, "/v1/accounts/big-account/deletion", key: api.keys.writer, json: [:])
            let answered = clock.now - started
            #expect(asked.status == 202, "\(asked.text.prefix(300))")
            let id = try #require(asked.json["id"] as? String)
            let madeAtOnce = (asked.json["requests"] as? [Any])?.count ?? 0
            #expect((1...200).contains(madeAtOnce), "one bounded batch in the request's transaction, not \(madeAtOnce)")
            #expect(try await Self.settled(api, deletion: id) == "revoked")
            // A figure for docs/benchmarks.md, not a check: speed is measured, never asserted.
            print("large account: \(count) grants, POST answered in \(answered), every grant revoked after \(clock.now - started)")
            let reports = try await api.stack.sandbox.admin.grants().filter { grants.contains($0.id) }
            #expect(reports.count == grants.count)
            #expect(reports.allSatisfy { $0.revocations == 1 && $0.revokeCalls == 1 }, "every grant revoked exactly once")
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.grants WHERE state = 'revoked'") == grants.count)
            let requests = try await Self.count(
                api,
                "SELECT count(*)::int FROM revoker.revocation_requests WHERE deletion_id = '\(id)' AND outcome = 'revoked'"
            )
            #expect(requests == grants.count, "one request per grant")
        }
    }

    /// A deletion the API stopped waiting for (an operator's transaction holds the account's
    /// grants) is ended at the server as the API answers 503: nothing is stored for the 503, and
    /// no statement is left waiting to commit it later.
    @Test func aDeletionTheAPIGaveUpOnIsEndedAtTheServerAndStoresNothing() async throws {
        try await APIHarness.with(http: ["database_timeout_seconds": 1]) { api in
            _ = try await api.stack.holdMany(clientID: Self.notes, accountReference: "locked-account", count: 3)
            let (locked, lockedSignal) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
            async let holding: Void = api.stack.database.client.withTransaction(logger: api.stack.logger) { connection in
                _ = try await connection.query(
                    "SELECT id FROM revoker.grants WHERE account_reference = 'locked-account' FOR UPDATE",
                    logger: api.stack.logger
                ).collect()
                lockedSignal.yield()
                var waiting = release.makeAsyncIterator()
                _ = await waiting.next()
            }
            var lockTaken = locked.makeAsyncIterator()
            _ = await lockTaken.next()
            let answer = try await api.call(.POST, "/v1/accounts/locked-account/deletion", key: api.keys.writer, json: [:])
            #expect(answer.status == 503, "\(answer.text)")
            try await eventually("no statement of the API still waits on the account", timeout: .seconds(30)) {
                try await Self.count(
                    api,
                    "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%start_account_deletion%'"
                ) == 0
            }
            releaseSignal.yield()
            try await holding
            #expect(try await Self.count(api, "SELECT count(*)::int FROM revoker.account_deletions") == 0, "nothing stored for a 503")
            // The same deletion asked again, nothing in its way, is accepted.
            let again = try await api.call(.POST, "/v1/accounts/locked-account/deletion", key: api.keys.writer, json: [:])
            #expect(again.status == 202, "\(again.text)")
        }
    }

    /// Two apps' backends delete the same reference: each deletion is its own, neither waits for
    /// the other, and neither answer names what the key cannot see.
    @Test func oneAppsDeletionNeitherBlocksNorRevealsAnothersOfTheSameReference() async throws {
        let photosOnly = APIHarness.Keys.make()
        let extra: [[String: any Sendable]] = [
            [
                "name": "photos-backend", "sha256": APIHarness.Keys.hash(photosOnly), "scopes": ["revocations:write", "revocations:read"],
                "client_ids": ["com.example.photos"],
            ]
        ]
        try await APIHarness.with(extraKeys: extra) { api in
            // No worker runs: both deletions stay under way.
            _ = try await api.stack.holdMany(clientID: "com.example.photos", accountReference: "shared-ref", count: 2)
            _ = try await api.stack.holdMany(clientID: Self.notes, accountReference: "shared-ref", count: 1)
            let photos = try await api.call(.POST, "/v1/accounts/shared-ref/deletion", key: photosOnly, json: [:])
            #expect(photos.status == 202, "\(photos.text)")
            let photosID = try #require(photos.json["id"] as? String)
            let notes = try await api.call(.POST, "/v1/accounts/shared-ref/deletion", key: api.keys.notesOnly, json: [:])
            #expect(notes.status == 202, "not held up by the other app's deletion: \(notes.text)")
            let notesID = try #require(notes.json["id"] as? String)
            #expect(notesID != photosID && !notes.text.contains(photosID), "nothing of the other app's deletion is named")
            #expect((notes.json["grants"] as? [[String: Any]])?.compactMap { $0["client_id"] as? String } == [Self.notes])
            let listed = try await api.call(.GET, "/v1/accounts/shared-ref/deletions", key: api.keys.notesOnly)
            #expect((listed.json["deletions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [notesID], "\(listed.text)")
            #expect(try await api.call(.GET, "/v1/deletions/\(photosID)", key: api.keys.notesOnly).status == 404)
            // Asked again, each key finds its own.
            let again = try await api.call(.POST, "/v1/accounts/shared-ref/deletion", key: api.keys.notesOnly, json: [:])
            #expect(again.status == 200 && again.json["id"] as? String == notesID, "\(again.text)")
        }
    }

    /// A deletion of every app (an admin's, or SQL without client_ids) is each app's only where it
    /// touched that app's grants: an app-limited key sees no more, an app is told only of its own
    /// part, and the trace of a deletion that touched several apps goes to none of them.
    @Test func aDeletionOfEveryAppIsEachAppsOnlyWhereItTouchedItsGrants() async throws {
        try await APIHarness.with(runWorker: true) { api in
            _ = try await api.stack.holdMany(clientID: "com.example.photos", accountReference: "everyone", count: 1)
            _ = try await api.stack.holdMany(clientID: Self.notes, accountReference: "everyone", count: 1)
            let trace = try #require(TraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
            let queue = api.stack.queue
            let everything = try await queue.deletions.request(accountReference: "everyone", actor: "api:ops", traceParent: trace)
            let nothing = try await queue.deletions.request(accountReference: "no-one-here", actor: "api:ops", traceParent: trace)
            #expect(nothing.deletion.outcome == .nothingHeld)
            // A deletion limited to one app keeps its trace on that app's events: the twin.
            _ = try await queue.deletions.request(accountReference: "notes-user", clientIDs: [Self.notes], actor: "api:notes", traceParent: trace)
            _ = try await Self.settled(api, deletion: everything.deletion.id.uuidString.lowercased())

            let seen = try await api.call(.GET, "/v1/accounts/everyone/deletions", key: api.keys.notesOnly)
            let deletions = try #require(seen.json["deletions"] as? [[String: Any]], "\(seen.text)")
            #expect(deletions.count == 1)
            #expect((deletions.first?["grants"] as? [[String: Any]])?.compactMap { $0["client_id"] as? String } == [Self.notes], "its part only")
            let none = try await api.call(.GET, "/v1/accounts/no-one-here/deletions", key: api.keys.notesOnly)
            #expect((none.json["deletions"] as? [[String: Any]])?.isEmpty == true, "it touched nothing of notes: \(none.text)")
            let all = try await api.call(.GET, "/v1/accounts/no-one-here/deletions", key: api.keys.reader)
            #expect((all.json["deletions"] as? [[String: Any]])?.count == 1, "an unlimited key sees it")

            let feed = EventFeed(client: api.stack.database.client, logger: api.stack.logger)
            let events = try await eventuallyValue("both deletions' completions in the feed") {
                let events = try await feed.events(after: nil, limit: 1000)
                let completed = Set(events.filter { $0.type == "account.deletion_completed" }.compactMap(\.externalReference))
                return completed.isSuperset(of: ["everyone", "notes-user"]) ? events : nil
            }
            #expect(!events.contains { $0.externalReference == "no-one-here" }, "no app had a part in it: no app is told")
            let everyone = events.filter { $0.externalReference == "everyone" }
            #expect(Set(everyone.map(\.clientID)) == ["com.example.photos", Self.notes])
            #expect(everyone.allSatisfy { $0.traceParent == nil }, "one trace id on two apps' events would tie them together")
            let notes = events.filter { $0.externalReference == "notes-user" }
            #expect(!notes.isEmpty && notes.allSatisfy { $0.traceParent == trace })
        }
    }
}
