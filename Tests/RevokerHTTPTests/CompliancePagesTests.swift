import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
import RevokerHTTP
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// The compliance pages over real HTTP, without following redirects, so that every cookie
/// and every refusal is seen as the browser would get it. The browser itself is driven by
/// `scripts/ui-browser-test`.
@Suite("Compliance pages")
struct CompliancePagesTests {
    struct Page {
        var status: Int
        var headers: HTTPHeaders
        var text: String

        var location: String? { headers.first(name: "Location") }

        /// The value `Set-Cookie` gives `name`, and its attributes.
        func cookie(_ name: String) -> (value: String, attributes: String)? {
            for header in headers[canonicalForm: "Set-Cookie"] where header.hasPrefix("\(name)=") {
                let parts = header.split(separator: ";", maxSplits: 1)
                return (String(parts[0].dropFirst(name.count + 1)), parts.count > 1 ? String(parts[1]) : "")
            }
            return nil
        }

        /// The value of the hidden csrf field.
        var csrf: String? {
            guard let range = text.range(of: "name=\"csrf\" value=\"") else { return nil }
            return String(text[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    final class Browser: Sendable {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        let harness: APIHarness

        init(_ harness: APIHarness) { self.harness = harness }

        func get(_ path: String, cookies: [String: String] = [:]) async throws -> Page {
            try await send(.GET, path, cookies: cookies)
        }

        func post(_ path: String, form: [String: String], cookies: [String: String] = [:], origin: String? = "same") async throws -> Page {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            let body = form.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
            return try await send(.POST, path, cookies: cookies, body: body, origin: origin == "same" ? harness.baseURL : origin)
        }

        func send(_ method: HTTPMethod, _ path: String, cookies: [String: String], body: String? = nil, origin: String? = nil) async throws -> Page {
            var request = HTTPClientRequest(url: harness.baseURL + path)
            request.method = method
            if !cookies.isEmpty { request.headers.add(name: "Cookie", value: cookies.map { "\($0)=\($1)" }.joined(separator: "; ")) }
            if let origin { request.headers.add(name: "Origin", value: origin) }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                request.body = .bytes(ByteBuffer(string: body))
            }
            let response = try await client.execute(request, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 4 * 1024 * 1024)
            let page = Page(status: Int(response.status.code), headers: response.headers, text: String(buffer: bytes))
            try harness.stack.expectNoSecrets(in: page.text)
            return page
        }

        /// Signs in with `key` through the form; the session cookie's value.
        func signIn(_ key: String) async throws -> String? {
            let form = try await get("/ui/sign-in")
            guard let token = form.cookie("revoker_sign_in")?.value, let csrf = form.csrf else { return nil }
            let answer = try await post("/ui/sign-in", form: ["api_key": key, "csrf": csrf], cookies: ["revoker_sign_in": token])
            return answer.status == 303 ? answer.cookie("revoker_session")?.value : nil
        }

        func shutdown() async throws { try await client.shutdown() }
    }

    static func withPages<T: Sendable>(_ body: (APIHarness, Browser) async throws -> T) async throws -> T {
        try await APIHarness.with(http: ["ui": ["enabled": true]]) { harness in
            let browser = Browser(harness)
            do {
                let result = try await body(harness, browser)
                try await browser.shutdown()
                return result
            } catch {
                try? await browser.shutdown()
                throw error
            }
        }
    }

    @Test func signingInTakesAnAuditKeyFromThisSiteAndStoresNeitherKeyNorToken() async throws {
        try await Self.withPages { harness, browser in
            let signedOut = try await browser.get("/ui/search")
            #expect(signedOut.status == 303 && signedOut.location == "/ui/sign-in")

            let form = try await browser.get("/ui/sign-in")
            #expect(form.status == 200)
            let csp = form.headers.first(name: "Content-Security-Policy") ?? ""
            #expect(csp.contains("default-src 'none'") && !csp.contains("script-src"), "\(csp)")
            #expect(form.headers.first(name: "X-Frame-Options") == "DENY")
            #expect(form.headers.first(name: "X-Content-Type-Options") == "nosniff")
            #expect(form.headers.first(name: "Cache-Control") == "no-store")
            let signInCookie = try #require(form.cookie("revoker_sign_in"))
            #expect(signInCookie.attributes.contains("HttpOnly") && signInCookie.attributes.contains("SameSite=Strict"))
            #expect(!signInCookie.attributes.contains("Secure"))
            let csrf = try #require(form.csrf)
            #expect(csrf == signInCookie.value)
            let cookies = ["revoker_sign_in": signInCookie.value]

            // A key without audit:read, a form without its token, a form from another site.
            let writer = try await browser.post("/ui/sign-in", form: ["api_key": harness.keys.writer, "csrf": csrf], cookies: cookies)
            #expect(writer.status == 403 && writer.text.contains("lacks the scope &#39;audit:read&#39;"), "\(writer.text)")
            #expect(writer.cookie("revoker_session") == nil)
            let unknown = try await browser.post("/ui/sign-in", form: ["api_key": "rvk_not_a_key", "csrf": csrf], cookies: cookies)
            #expect(unknown.status == 401 && unknown.cookie("revoker_session") == nil)
            let forged = try await browser.post("/ui/sign-in", form: ["api_key": harness.keys.auditor, "csrf": "x" + csrf], cookies: cookies)
            #expect(forged.status == 403 && forged.cookie("revoker_session") == nil)
            let elsewhere = try await browser.post(
                "/ui/sign-in",
                form: ["api_key": harness.keys.auditor, "csrf": csrf],
                cookies: cookies,
                origin: "http://evil.example"
            )
            #expect(elsewhere.status == 403 && elsewhere.text.contains("another site"))
            #expect(elsewhere.headers.first(name: "Content-Security-Policy") != nil)

            let signedIn = try await browser.post("/ui/sign-in", form: ["api_key": harness.keys.auditor, "csrf": csrf], cookies: cookies)
            #expect(signedIn.status == 303 && signedIn.location == "/ui/search")
            let session = try #require(signedIn.cookie("revoker_session"))
            #expect(session.attributes.contains("HttpOnly") && session.attributes.contains("SameSite=Strict"))
            #expect(session.value != harness.keys.auditor && session.value.count == 43)

            // The database holds the token's hash and the key's configured digest, nothing more.
            let stored = try await harness.stack.database.client.query(
                "SELECT token_hash, key_name, key_sha256, csrf_token FROM revoker.ui_sessions"
            ).collect()
            #expect(stored.count == 1)
            let (tokenHash, keyName, keyDigest, sessionCSRF) = try #require(stored.first).decode((Data, String, Data, String).self)
            #expect(Array(tokenHash) == Array(SHA256.hash(data: Array(session.value.utf8))))
            #expect(keyName == "compliance")
            #expect(Array(keyDigest) == Array(SHA256.hash(data: Array(harness.keys.auditor.utf8))))
            #expect(sessionCSRF != session.value)

            let search = try await browser.get("/ui/search", cookies: ["revoker_session": session.value])
            #expect(search.status == 200 && search.text.contains("Revocation requests"))
            #expect(!search.text.contains(harness.keys.auditor))

            // Sign-out needs the session's own form token.
            let noToken = try await browser.post("/ui/sign-out", form: ["csrf": csrf], cookies: ["revoker_session": session.value])
            #expect(noToken.status == 403)
            let out = try await browser.post(
                "/ui/sign-out",
                form: ["csrf": try #require(search.csrf)],
                cookies: ["revoker_session": session.value]
            )
            #expect(out.status == 303 && out.location == "/ui/sign-in?signed_out=1")
            #expect(out.cookie("revoker_session")?.attributes.contains("Max-Age=0") == true)
            let after = try await browser.get("/ui/search", cookies: ["revoker_session": session.value])
            #expect(after.status == 303 && after.location == "/ui/sign-in")
            let left = try await harness.stack.database.client.query("SELECT count(*)::int FROM revoker.ui_sessions").collect()
            #expect(try left.first?.decode(Int.self) == 0)
            // Who signed in and out is in the audit trail.
            let notes = try await harness.stack.database.client.query(
                "SELECT detail FROM revoker.audit_events WHERE event = 'note' AND actor = 'ui:compliance' ORDER BY id"
            ).collect().map { try $0.decode(String.self) }
            #expect(notes == ["signed in to the compliance pages", "signed out of the compliance pages"])
        }
    }

    /// Signs in over a connection from another loopback address (another client): the status
    /// line of the answer to the form.
    static func signIn(_ harness: APIHarness, from source: String, key: String) async throws -> String {
        let port = try #require(URL(string: harness.baseURL)?.port)
        let host = "127.0.0.1:\(port)"
        let form = try await RawConnection.open(port: port, from: source)
        try await form.send("GET /ui/sign-in HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
        _ = await form.closes(within: .seconds(20))
        let page = form.text
        let token = try #require(page.range(of: "revoker_sign_in=").map { String(page[$0.upperBound...].prefix { $0 != ";" }) })
        let csrf = try #require(page.range(of: "name=\"csrf\" value=\"").map { String(page[$0.upperBound...].prefix { $0 != "\"" }) })
        let body = "api_key=\(key)&csrf=\(csrf)"
        let post = try await RawConnection.open(port: port, from: source)
        try await post.send(
            "POST /ui/sign-in HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://\(host)\r\nCookie: revoker_sign_in=\(token)\r\n"
                + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        )
        _ = await post.closes(within: .seconds(20))
        return String(post.text.prefix { $0 != "\r" })
    }

    @Test func repeatedFailedSignInsFromOneAddressAreRefusedForAWhileAndOtherAddressesAreNot() async throws {
        try await Self.withPages { harness, browser in
            let form = try await browser.get("/ui/sign-in")
            let csrf = try #require(form.csrf)
            let cookies = ["revoker_sign_in": try #require(form.cookie("revoker_sign_in")).value]
            func attempt(_ key: String) async throws -> Page {
                try await browser.post("/ui/sign-in", form: ["api_key": key, "csrf": csrf], cookies: cookies)
            }
            // A key without audit:read fails as an unknown key does.
            #expect(try await attempt(harness.keys.writer).status == 403)
            for index in 1..<10 {
                let refused = try await attempt("rvk_guess_\(index)")
                #expect(refused.status == 401, "attempt \(index + 1): \(refused.status)")
                #expect(refused.headers.first(name: "Retry-After") == nil)
            }
            // The tenth failure paused the address: even the right key is not looked at.
            for key in [harness.keys.auditor, "rvk_guess_more"] {
                let paused = try await attempt(key)
                #expect(paused.status == 429, "\(paused.status)")
                #expect(paused.cookie("revoker_session") == nil)
                let retryAfter = try #require(paused.headers.first(name: "Retry-After").flatMap { Int($0) })
                #expect((1...900).contains(retryAfter), "\(retryAfter)")
                #expect(paused.text.contains("Too many failed sign-ins"))
            }
            // Another address is not paused, and signs in.
            #expect(try await Self.signIn(harness, from: "127.0.0.2", key: "rvk_guess_other").hasPrefix("HTTP/1.1 401"))
            #expect(try await Self.signIn(harness, from: "127.0.0.2", key: harness.keys.auditor).hasPrefix("HTTP/1.1 303"))
            // The paused one stays paused.
            #expect(try await attempt(harness.keys.auditor).status == 429)
        }
    }

    @Test func searchFindsRequestsInTheAuditTrailShowsThemEscapedAndExportsThem() async throws {
        try await Self.withPages { harness, browser in
            let references = ["ui-plain", "=HYPERLINK(1)", "<b>x</b>\"\u{301} onmouseover=1"]
            var ids: [String: String] = [:]
            for (index, reference) in references.enumerated() {
                let created = try await harness.call(
                    .POST,
                    "/v1/revocations",
                    key: harness.keys.writer,
                    json: [
                        "client_id": "com.example.photos", "external_reference": reference, "apple_user_id": "ui-user-\(index)",
                        "refresh_token": "rt-ui-\(index)-\(UUID().uuidString)",
                    ]
                )
                #expect(created.status == 202, "\(created.text)")
                ids[reference] = created.json["id"] as? String
            }
            let cancelled = try #require(ids["ui-plain"])
            let cancel = try await harness.call(.POST, "/v1/revocations/\(cancelled)/cancel", key: harness.keys.writer)
            #expect(cancel.status == 200, "\(cancel.text)")

            let session = try #require(try await browser.signIn(harness.keys.auditor))
            let cookies = ["revoker_session": session]

            let all = try await browser.get("/ui/search", cookies: cookies)
            #expect(all.status == 200)
            #expect(all.text.contains("3 requests on this page"), "\(all.text)")
            // Escaped per character, the combining mark cannot join the quote and end an attribute.
            #expect(!all.text.contains("<b>x</b>") && all.text.contains("&lt;b&gt;x&lt;/b&gt;&quot;\u{301} onmouseover=1"))

            let byOutcome = try await browser.get("/ui/search?outcome=cancelled", cookies: cookies)
            #expect(byOutcome.text.contains("1 request on this page") && byOutcome.text.contains("/ui/requests/\(cancelled)"))
            let open = try await browser.get("/ui/search?outcome=in_progress&apple_user_id=ui-user-1", cookies: cookies)
            let hyperlink = try #require(ids["=HYPERLINK(1)"])
            #expect(open.text.contains("1 request on this page") && open.text.contains("/ui/requests/\(hyperlink)"))
            let badDate = try await browser.get("/ui/search?from=2026-02-30", cookies: cookies)
            #expect(badDate.status == 400 && badDate.text.contains("must be a day such as"))
            let tomorrow = Date().addingTimeInterval(86_400).formatted(.iso8601.year().month().day())
            let future = try await browser.get("/ui/search?from=\(tomorrow)", cookies: cookies)
            #expect(future.text.contains("0 requests on this page"))

            let request = try await browser.get("/ui/requests/\(cancelled)", cookies: cookies)
            #expect(request.status == 200)
            #expect(request.text.contains(">enqueued<") && request.text.contains(">cancelled<"))
            #expect(request.text.contains("id=\"outcome\">cancelled<"))
            let missing = try await browser.get("/ui/requests/\(UUID().uuidString)", cookies: cookies)
            #expect(missing.status == 404 && missing.headers.first(name: "Content-Type")?.hasPrefix("text/html") == true)

            let csv = try await browser.get("/ui/search.csv", cookies: cookies)
            #expect(csv.status == 200 && csv.headers.first(name: "Content-Disposition")?.hasPrefix("attachment;") == true)
            let lines = csv.text.split(separator: "\r\n")
            #expect(
                lines.first == "request_id,requested_at,requested_by,client_id,external_reference,apple_user_id,outcome,finished_at,evidence_archive"
            )
            #expect(lines.count == 4)
            #expect(csv.text.contains(",'=HYPERLINK(1),"), "\(csv.text)")
            #expect(csv.text.contains(",cancelled,"))

            let timeline = try await browser.get("/ui/requests/\(cancelled)/events.csv", cookies: cookies)
            #expect(timeline.status == 200 && timeline.text.contains("enqueued") && timeline.text.contains("cancelled"))

            let status = try await browser.get("/ui/status", cookies: cookies)
            #expect(status.status == 200 && status.text.contains("id=\"queue-depth\">2<"), "\(status.text)")
        }
    }

    /// The export streams page after page: every request the search finds, past the 10,000 it
    /// once stopped at without saying so.
    @Test func theExportHoldsEveryRequestFoundOverManyPages() async throws {
        try await Self.withPages { harness, browser in
            _ = try await harness.stack.database.client.query(
                """
                SELECT revoker.enqueue_revocation('com.example.notes', 'export-' || g, 'refresh_token', 'rt-export-' || g)
                FROM generate_series(1, 2345) AS g
                """
            ).collect()
            let session = try #require(try await browser.signIn(harness.keys.admin))
            let csv = try await browser.get("/ui/search.csv?client_id=com.example.notes", cookies: ["revoker_session": session])
            #expect(csv.status == 200)
            let lines = csv.text.split(separator: "\r\n")
            #expect(lines.count == 1 + 2345, "\(lines.count)")
            #expect(lines.first?.hasPrefix("request_id,requested_at") == true)
            #expect(Set(lines.dropFirst().map { $0.split(separator: ",")[4] }).count == 2345)
        }
    }

    @Test func aKeyLimitedToOneAppSeesThatAppOnly() async throws {
        try await Self.withPages { harness, browser in
            for clientID in ["com.example.photos", "com.example.notes"] {
                let created = try await harness.call(
                    .POST,
                    "/v1/revocations",
                    key: harness.keys.admin,
                    json: [
                        "client_id": clientID, "external_reference": "limit-\(clientID)", "refresh_token": "rt-limit-\(UUID().uuidString)",
                    ]
                )
                #expect(created.status == 202, "\(created.text)")
            }
            let session = try #require(try await browser.signIn(harness.keys.notesOnly))
            let cookies = ["revoker_session": session]
            let search = try await browser.get("/ui/search", cookies: cookies)
            #expect(search.text.contains("limit-com.example.notes") && !search.text.contains("limit-com.example.photos"))
            let other = try await browser.get("/ui/search?client_id=com.example.photos", cookies: cookies)
            #expect(other.status == 403 && other.text.contains("limited to other apps"))
            let csv = try await browser.get("/ui/search.csv", cookies: cookies)
            #expect(csv.text.contains("limit-com.example.notes") && !csv.text.contains("limit-com.example.photos"))
            // Its status counts its app's queue only.
            let status = try await browser.get("/ui/status", cookies: cookies)
            #expect(status.text.contains("id=\"queue-depth\">1<"), "\(status.text)")
        }
    }
}
