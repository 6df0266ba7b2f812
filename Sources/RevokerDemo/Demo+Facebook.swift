import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore

extension Demo {
    /// Facebook Login, the whole story: a person signs in (the backend hands Revoker their access
    /// token) and another with Limited Login (the token alone); the first later asks Facebook to
    /// delete their data: Facebook calls the Data Deletion Request callback, Revoker ends the
    /// grant, answers with the status page and its code, and tells the backend, which records
    /// that it deleted the data; the second account is deleted by its reference. Returns how many
    /// things did not end as expected.
    func facebook(configuration: RevokerConfiguration, sandbox: RunningSandbox, app: String) async throws -> Int {
        var configuration = configuration
        configuration.http.port = 0
        let facebook = LocalProvider.facebook
        let admin = sandbox.admin(for: facebook.name)
        let base = sandbox.baseURL + facebook.path + "/sandbox"
        return try await RevokerApp(configuration: configuration, parts: [.api, .worker], logger: logger).withRunning { running in
            let queue = running.app.queue
            let api = "http://127.0.0.1:\(running.apiPort ?? 0)"
            var surprises = 0
            section("10. Facebook Login: two people sign in, and the backend hands Revoker what each sign-in gave it (as POST /v1/grants does)")
            let classic = try await admin.mintAccessToken(clientID: app, subject: "3000000001")
            let limited = try await Self.post(
                base + "/limited-login-tokens",
                ["app_id": app, "subject": "3000000002"],
                client: sandbox.httpClient
            )
            let signIns: [(String, CredentialKind, String, String, String)] = [
                ("acct-3001", .accessToken, classic.value, classic.grantID, "signs in with Facebook (an access token)"),
                ("acct-3002", .identityToken, limited["value"] as? String ?? "", limited["grant_id"] as? String ?? "", "signs in with Limited Login"),
            ]
            var held: [Grant] = []
            for (account, kind, secret, _, story) in signIns {
                var new = try NewGrant(
                    provider: facebook.name.rawValue,
                    clientID: app,
                    accountReference: account,
                    credential: Credential(kind: kind, secret: secret)
                )
                if kind == .identityToken {
                    // The API verifies a Limited Login token completely before it takes it in.
                    let subject = try await RevokerApp.withProviders(configuration, logger: logger) { providers in
                        try await EnqueueRules(served: configuration.clientIDsByProvider, providers: providers)
                            .verifiedSubject(of: secret, provider: facebook.name.rawValue, clientID: app)
                    }
                    new = try new.withUser(subject, fromIdentityToken: true)
                }
                let registration = try await queue.custody.register(new, actor: "demo")
                let grant = try await queue.custody.settled(registration.grant, within: .seconds(30))
                held.append(grant)
                if grant.state != .held { surprises += 1 }
                output(
                    "   \(pad(account, 10)) \(pad(story, 42)) → \(grant.state.rawValue), user \(grant.userID ?? "-") (\(grant.userSource?.rawValue ?? "not verified"))"
                )
            }

            section(
                "11. acct-3001's person removes the app in Facebook's settings and asks for their data to be deleted: Facebook calls the Data Deletion Request URL"
            )
            let delivery = try await Self.post(
                base + "/callbacks",
                ["url": api + "/v1/facebook/data-deletion/\(app)", "app_id": app, "user_id": "3000000001"],
                client: sandbox.httpClient
            )
            let answer = (try? JSONSerialization.jsonObject(with: Data(((delivery["body"] as? String) ?? "").utf8))) as? [String: Any] ?? [:]
            let (url, code) = (answer["url"] as? String ?? "", answer["confirmation_code"] as? String ?? "")
            output("   Facebook → POST /v1/facebook/data-deletion/\(app): \(delivery["status"] ?? "-") \(delivery["body"] ?? "")")
            let ended = try await queue.custody.grant(id: held[0].id)
            output("   acct-3001's Facebook grant is now \(ended?.state.rawValue ?? "missing") (\(ended?.endReason ?? "-")), its token erased")
            if ended?.state != .dead || code.isEmpty { surprises += 1 }
            let feed = EventFeed(client: running.database, logger: logger)
            let told = try await feed.events(after: nil, clientIDs: [app], limit: 100).first { $0.type == "facebook.data_deletion_requested" }
            output("   The backend is told: \(told?.type ?? "nothing") (user_id \(told?.userID ?? "-"), erasure_code \(told?.erasureCode ?? "-"))")
            if told?.erasureCode != code { surprises += 1 }
            output("   The person opens \(url): \(try await Self.statusLine(url, client: sandbox.httpClient))")
            let erasures = ErasureRequests(client: running.database, logger: logger)
            _ = try await erasures.decide(code: code, .deleted, justification: nil, clientIDs: nil, actor: "demo")
            let after = try await Self.statusLine(url, client: sandbox.httpClient)
            output("   The backend deletes the person's data and says so (POST /v1/erasures/{code}/decision); the page now: \(after)")
            if !after.hasPrefix("Deleted") { surprises += 1 }

            section("12. Later acct-3002 is deleted by its reference alone: its Limited Login grant is uninstalled")
            let asked = try await queue.deletions.request(accountReference: "acct-3002", actor: "demo")
            let deletion = try await queue.deletions.settled(asked.deletion, within: .seconds(60))
            let record = try await admin.grant(signIns[1].3)
            output(
                "   acct-3002  deletion \(deletion.state.rawValue), outcome \(deletion.outcome?.rawValue ?? "-"); provider: revoked=\(record.revoked) revoke_calls=\(record.revokeCalls)"
            )
            if deletion.outcome != .revoked || !record.revoked || record.revokeCalls != 1 { surprises += 1 }
            return surprises
        }
    }

    /// Posts JSON to the sandbox's admin surface and returns its JSON answer.
    static func post(_ url: String, _ body: [String: String], client: HTTPClient) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
    }

    /// What the status page says of the person's data, as its `#state` line.
    static func statusLine(_ url: String, client: HTTPClient) async throws -> String {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        let page = String(buffer: try await response.body.collect(upTo: 1 << 20))
        guard let start = page.range(of: "id=\"state\""), let open = page[start.upperBound...].firstIndex(of: ">"),
            let close = page[open...].range(of: "</dd>")
        else { return "HTTP \(response.status.code)" }
        return String(page[page.index(after: open)..<close.lowerBound])
    }
}
