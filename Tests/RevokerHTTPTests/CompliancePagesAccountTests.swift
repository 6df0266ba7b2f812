import Foundation
import GoogleSignInSandbox
import NIOHTTP1
import ProviderSandbox
import RevokerLocalStack
import RevokerTesting
import Testing

/// An account's page (`/ui/accounts/{reference}`): the grants held for it and its deletions,
/// with a worker and both providers' sandboxes, over real HTTP.
extension CompliancePagesTests {
    static let notes = GrantCustodyAPITests.notes
    static let web = GrantCustodyAPITests.web

    /// The pages beside custody: `writer` registers grants (`grants:write`).
    static func withAccountPages<T: Sendable>(_ body: (APIHarness, Browser, _ writer: String) async throws -> T) async throws -> T {
        let http: [String: any Sendable] = ["grant_exchange_wait_seconds": 30, "ui": ["enabled": true]]
        return try await GrantCustodyAPITests.with(http: http) { api, writer, _ in
            let browser = Browser(api)
            do {
                let result = try await body(api, browser, writer)
                try await browser.shutdown()
                return result
            } catch {
                try? await browser.shutdown()
                throw error
            }
        }
    }

    /// Registers a grant through the API; its id once held.
    static func register(_ api: APIHarness, writer: String, _ body: [String: Any]) async throws -> String {
        let held = try await api.call(.POST, "/v1/grants", key: writer, json: body)
        #expect(held.status == 201, "\(held.text)")
        return try #require(held.json["id"] as? String, "\(held.text)")
    }

    /// An Apple grant of the notes app, held from a refresh token minted in the sandbox.
    static func holdApple(_ api: APIHarness, writer: String, account: String, user: String) async throws -> (id: String, token: String) {
        let (_, token) = try await api.mintRefreshToken(clientID: notes, subject: user)
        let id = try await register(
            api,
            writer: writer,
            ["client_id": notes, "account_reference": account, "refresh_token": token, "user_id": user]
        )
        return (id, token)
    }

    /// A Google grant of the web app, held from a refresh token minted in the sandbox.
    static func holdGoogle(_ api: APIHarness, writer: String, account: String, user: String) async throws -> (id: String, token: String) {
        let minted = try await api.stack.sandbox.google.mintRefreshToken(clientID: web, subject: user)
        api.stack.secrets.add(minted.value)
        let id = try await register(
            api,
            writer: writer,
            ["provider": "google", "client_id": web, "account_reference": account, "refresh_token": minted.value, "user_id": user]
        )
        return (id, minted.value)
    }

    /// Asks for the account's deletion (every app, or `clientIDs`) and waits until it completed.
    static func deleteAccount(_ api: APIHarness, _ encodedReference: String, clientIDs: [String]? = nil) async throws -> [String: Any] {
        let body: [String: Any] = clientIDs.map { ["client_ids": $0] } ?? [:]
        let asked = try await api.call(.POST, "/v1/accounts/\(encodedReference)/deletion", key: api.keys.writer, json: body)
        #expect([201, 202].contains(asked.status), "\(asked.text)")
        let id = try #require(asked.json["id"] as? String, "\(asked.text)")
        return try await AccountDeletionAPITests.deletion(api, id).json
    }

    /// The HTML from `start` to the first `end` after it.
    static func element(_ text: String, from start: String, to end: String = "</tr>") -> String? {
        guard let from = text.range(of: start), let to = text[from.upperBound...].range(of: end) else { return nil }
        return String(text[from.lowerBound..<to.upperBound])
    }

    /// The value of the first `href` in `html` whose class is `className`.
    static func link(_ html: String, class className: String) -> String? {
        guard let range = html.range(of: "class=\"\(className)\" href=\"") else { return nil }
        return String(html[range.upperBound...].prefix { $0 != "\"" })
    }

    /// `path` sent byte for byte (the HTTP client would mend a broken one): the whole answer.
    static func rawGet(_ harness: APIHarness, _ path: String, session: String) async throws -> String {
        let port = try #require(URL(string: harness.baseURL)?.port)
        let connection = try await RawConnection.open(port: port)
        try await connection.send(
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: revoker_session=\(session)\r\nConnection: close\r\n\r\n"
        )
        _ = await connection.closes(within: .seconds(20))
        try harness.stack.expectNoSecrets(in: connection.text)
        return connection.text
    }

    @Test func anAccountsPageShowsItsGrantsAndDeletionsAndNeverAToken() async throws {
        try await Self.withAccountPages { api, browser, writer in
            let apple = try await Self.holdApple(api, writer: writer, account: "ui-account-1", user: "apple-user-ui")
            let code = try await api.stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "google-user-ui"))
            api.stack.secrets.add(code.value)
            let google = try await Self.register(
                api,
                writer: writer,
                ["provider": "google", "client_id": Self.web, "account_reference": "ui-account-1", "authorization_code": code.value]
            )
            let cookies = ["revoker_session": try #require(try await browser.signIn(api.keys.auditor))]

            let held = try await browser.get("/ui/accounts/ui-account-1", cookies: cookies)
            #expect(held.status == 200, "\(held.text)")
            #expect(held.text.contains("id=\"grant-count\">2 grants.") && held.text.contains("id=\"deletion-count\">0 deletions."), "\(held.text)")
            let appleRow = try #require(Self.element(held.text, from: "<tr id=\"grant-\(apple.id)\""), "\(held.text)")
            for cell in ["apple", Self.notes, "apple-user-ui", "refresh_token", "held"] {
                #expect(appleRow.contains(">\(cell)<"), "\(cell) in \(appleRow)")
            }
            let googleRow = try #require(Self.element(held.text, from: "<tr id=\"grant-\(google)\""), "\(held.text)")
            for cell in ["google", Self.web, "google-user-ui", "authorization_code", "held"] {
                #expect(googleRow.contains(">\(cell)<"), "\(cell) in \(googleRow)")
            }
            #expect(!held.text.contains(apple.token) && !held.text.contains(code.value), "never a token or code")
            #expect(Self.link(appleRow, class: "revoke-request") == nil, "no revocation before a deletion")
            // The hold request's trail is one click away, and links back to the account.
            let hold = try #require(Self.link(googleRow, class: "hold-request"))
            let holdPage = try await browser.get(hold, cookies: cookies)
            #expect(holdPage.status == 200 && holdPage.text.contains(">token_exchanged<"), "\(holdPage.text)")
            #expect(holdPage.text.contains("id=\"account-link\" href=\"/ui/accounts/ui-account-1\""))

            let deletion = try await Self.deleteAccount(api, "ui-account-1")
            #expect(deletion["outcome"] as? String == "revoked", "\(deletion)")
            let deletionID = try #require(deletion["id"] as? String)
            let deleted = try await browser.get("/ui/accounts/ui-account-1", cookies: cookies)
            #expect(deleted.text.contains("id=\"deletion-count\">1 deletion."), "\(deleted.text)")
            let deletionRow = try #require(Self.element(deleted.text, from: "<tr id=\"deletion-\(deletionID)\""), "\(deleted.text)")
            for cell in ["api:billing", "every app", "completed", "revoked", "2"] {
                #expect(deletionRow.contains(">\(cell)<"), "\(cell) in \(deletionRow)")
            }
            for id in [apple.id, google] {
                let row = try #require(Self.element(deleted.text, from: "<tr id=\"grant-\(id)\""))
                #expect(row.contains("class=\"outcome good\">revoked<") && row.contains(">revoked</td>"), "state and end reason: \(row)")
                let revoke = try #require(Self.link(row, class: "revoke-request"), "\(row)")
                let request = try await browser.get(revoke, cookies: cookies)
                #expect(request.status == 200 && request.text.contains("id=\"outcome\">revoked<"), "\(request.text)")
            }
            #expect(!deleted.text.contains(apple.token) && !deleted.text.contains(code.value))
            // The completed deletion offers the account's signed receipt; a held account's page has none to offer.
            let receiptLink = try #require(Self.link(deletionRow, class: "account-receipt"), "\(deletionRow)")
            #expect(receiptLink == "/ui/deletions/\(deletionID)/receipt.json")
            let receipt = try await browser.get(receiptLink, cookies: cookies)
            #expect(receipt.status == 200 && receipt.text.contains("\"format\" : \"revoker.audit.account-receipt.v1\""), "\(receipt.text)")
            #expect(!receipt.text.contains(apple.token) && !receipt.text.contains(code.value))
            #expect(Self.link(held.text, class: "account-receipt") == nil)

            // The search reaches the account: a field, and each row's reference.
            let form = try await browser.get("/ui/accounts?reference=ui-account-1", cookies: cookies)
            #expect(form.status == 303 && form.location == "/ui/accounts/ui-account-1")
            let empty = try await browser.get("/ui/accounts?reference=+", cookies: cookies)
            #expect(empty.status == 400 && empty.text.contains("Type the account"), "\(empty.text)")
            let search = try await browser.get("/ui/search?reference=ui-account-1", cookies: cookies)
            #expect(search.text.contains("2 requests on this page"), "the two revocations: \(search.text)")
            #expect(search.text.contains("<a class=\"account\" href=\"/ui/accounts/ui-account-1\">ui-account-1</a>"), "\(search.text)")

            let unknown = try await browser.get("/ui/accounts/nobody-here", cookies: cookies)
            #expect(unknown.status == 404 && unknown.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true)
            #expect(unknown.text.contains("no grant and no deletion of this account"), "\(unknown.text)")
            let signedOut = try await browser.get("/ui/accounts/ui-account-1")
            #expect(signedOut.status == 303 && signedOut.location == "/ui/sign-in")
        }
    }

    @Test func aKeyLimitedToOneAppSeesThatAppsGrantsAndDeletionsOnly() async throws {
        try await Self.withAccountPages { api, browser, writer in
            let apple = try await Self.holdApple(api, writer: writer, account: "ui-shared", user: "apple-user-shared")
            let google = try await Self.holdGoogle(api, writer: writer, account: "ui-shared", user: "google-user-shared")
            _ = try await Self.holdGoogle(api, writer: writer, account: "ui-web-only", user: "google-user-web")
            let webDeletion = try await Self.deleteAccount(api, "ui-web-only", clientIDs: [Self.web])
            #expect(webDeletion["outcome"] as? String == "revoked", "\(webDeletion)")
            let shared = try await Self.deleteAccount(api, "ui-shared")
            #expect(shared["outcome"] as? String == "revoked", "\(shared)")

            let limited = ["revoker_session": try #require(try await browser.signIn(api.keys.notesOnly))]
            let page = try await browser.get("/ui/accounts/ui-shared", cookies: limited)
            #expect(page.status == 200, "\(page.text)")
            #expect(page.text.contains("<tr id=\"grant-\(apple.id)\"") && page.text.contains("apple-user-shared"))
            #expect(!page.text.contains(google.id) && !page.text.contains(Self.web) && !page.text.contains("google-user-shared"), "\(page.text)")
            #expect(page.text.contains("id=\"grant-count\">1 grant."), "\(page.text)")
            // The deletion of every app is shown, with the one grant of its app.
            let deletionRow = try #require(Self.element(page.text, from: "<tr id=\"deletion-"), "\(page.text)")
            #expect(deletionRow.contains(">every app<") && deletionRow.contains(">1<"), "\(deletionRow)")
            let revoke = try #require(Self.link(page.text, class: "revoke-request"))
            #expect(try await browser.get(revoke, cookies: limited).status == 200)

            let other = try await browser.get("/ui/accounts/ui-web-only", cookies: limited)
            #expect(other.status == 404, "another app's grant and its deletion are not there: \(other.text)")
            #expect(!other.text.contains("google-user-web") && !other.text.contains(Self.web))
            let search = try await browser.get("/ui/search?reference=ui-shared", cookies: limited)
            #expect(search.text.contains("1 request on this page"), "\(search.text)")

            // Every app for a key without a limit.
            let all = ["revoker_session": try #require(try await browser.signIn(api.keys.auditor))]
            let full = try await browser.get("/ui/accounts/ui-shared", cookies: all)
            #expect(full.text.contains("id=\"grant-count\">2 grants.") && full.text.contains("google-user-shared"), "\(full.text)")
            let webOnly = try await browser.get("/ui/accounts/ui-web-only", cookies: all)
            #expect(webOnly.status == 200 && webOnly.text.contains(">\(Self.web)<"), "\(webOnly.text)")
            for text in [page.text, full.text, webOnly.text] {
                #expect(!text.contains(apple.token) && !text.contains(google.token))
            }
        }
    }

    @Test func aReferenceWithSlashesQuotesAndMarkupRoundTripsAndIsEscaped() async throws {
        try await Self.withAccountPages { api, browser, writer in
            let reference = "team/7?x=1#part <i>x</i> \"q\" 'e' & %2F"
            let encoded = "team%2F7%3Fx%3D1%23part%20%3Ci%3Ex%3C%2Fi%3E%20%22q%22%20%27e%27%20%26%20%252F"
            let apple = try await Self.holdApple(api, writer: writer, account: reference, user: "apple-user-odd")
            let cookies = ["revoker_session": try #require(try await browser.signIn(api.keys.auditor))]

            let form = try await browser.get("/ui/accounts?reference=\(encoded)", cookies: cookies)
            #expect(form.status == 303 && form.location == "/ui/accounts/\(encoded)", "\(form.location ?? "no location")")
            let page = try await browser.get("/ui/accounts/\(encoded)", cookies: cookies)
            #expect(page.status == 200, "\(page.text)")
            let escaped = "team/7?x=1#part &lt;i&gt;x&lt;/i&gt; &quot;q&quot; &#39;e&#39; &amp; %2F"
            #expect(page.text.contains("<code id=\"account-reference\">\(escaped)</code>"), "\(page.text)")
            #expect(!page.text.contains("<i>x</i>"))
            #expect(page.text.contains("href=\"/ui/search?reference=\(encoded)\""))
            let row = try #require(Self.element(page.text, from: "<tr id=\"grant-\(apple.id)\""))
            #expect(row.contains(">held<") && row.contains(">apple-user-odd<"))

            // The request page links back with the same encoding.
            let hold = try #require(Self.link(row, class: "hold-request"))
            let request = try await browser.get(hold, cookies: cookies)
            #expect(request.text.contains("<a id=\"account-link\" href=\"/ui/accounts/\(encoded)\">\(escaped)</a>"), "\(request.text)")
            // Percent-encoding that is not UTF-8, or a reference that is not visible text, is refused as the API refuses it.
            let broken = try await Self.rawGet(api, "/ui/accounts/%FF", session: try #require(cookies["revoker_session"]))
            #expect(broken.hasPrefix("HTTP/1.1 400") && broken.contains("not valid percent-encoding"), "\(broken)")
            let control = try await browser.get("/ui/accounts/a%0Ab", cookies: cookies)
            #expect(control.status == 400 && control.text.contains("visible text"), "\(control.text)")
            // A near miss is another account.
            let near = try await browser.get("/ui/accounts/team/7", cookies: cookies)
            #expect(near.status == 404)
            #expect(!page.text.contains(apple.token) && !request.text.contains(apple.token))
        }
    }
}
