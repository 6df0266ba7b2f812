import AppleSignIn
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// Cross-Account Protection over real HTTP: the Google sandbox signs and pushes security event
/// tokens to `POST /v1/google/risc` as Google does.
@Suite("HTTP API: Google's security events")
struct GoogleSecurityEventsAPITests {
    static let web = "1000-notes.apps.googleusercontent.com"

    static func storedEvents(_ api: APIHarness) async throws -> Int {
        try await ProviderMessages(client: api.stack.database.client, logger: api.stack.logger).count(from: .google)
    }

    @Test func tokensRevokedEndsTheUsersLiveGoogleRequestsOnceAndEveryEventReachesTheFeed() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            let google = api.stack.sandbox.google
            let url = api.baseURL + "/v1/google/risc"
            let live = try await api.stack.enqueue(
                provider: .google,
                clientID: Self.web,
                reference: "acct-1",
                kind: .refreshToken,
                subject: "u-risc",
                userID: "u-risc"
            )
            let other = try await api.stack.enqueue(
                provider: .google,
                clientID: Self.web,
                reference: "acct-2",
                kind: .refreshToken,
                subject: "u-other",
                userID: "u-other"
            )

            let revoked = try await google.sendSecurityEvent(.init(url: url, audience: Self.web, subject: "u-risc", type: "tokens-revoked"))
            #expect(revoked.status == 202, "\(revoked.body)")
            let ended = try #require(try await api.stack.queue.request(id: live.request.id))
            #expect(ended.state == .succeeded && ended.outcome == .revokedByUser && !ended.hasCredential)
            #expect(try await api.stack.queue.request(id: other.request.id)?.state == .pending, "another user's request waits")
            let grant = try await google.grant(live.grantID)
            #expect(grant.revokedByUser && grant.revokeCalls == 0, "ended without a call to Google")

            // Google delivers again: nothing changes.
            let replay = try await google.replaySecurityEvent(jti: revoked.jti)
            #expect(replay.status == 202)
            #expect(try await Self.storedEvents(api) == 1)

            // The other events are recorded and passed on; they end nothing.
            for (type, extra) in [("account-disabled", "hijacking"), ("sessions-revoked", nil), ("verification", nil)] as [(String, String?)] {
                let sent = try await google.sendSecurityEvent(
                    .init(
                        url: url,
                        audience: Self.web,
                        subject: "u-other",
                        type: type,
                        reason: extra,
                        state: type == "verification" ? "check-42" : nil
                    )
                )
                #expect(sent.status == 202, "\(type): \(sent.body)")
            }
            #expect(try await api.stack.queue.request(id: other.request.id)?.state == .pending)
            #expect(try await Self.storedEvents(api) == 4)

            let events = try await AppleNotificationsAPITests.feed(api, count: 5)
            let types = events.compactMap { $0["type"] as? String }
            for expected in [
                "google.tokens_revoked", "revocation.succeeded", "google.account_disabled", "google.sessions_revoked", "google.verification",
            ] {
                #expect(types.contains(expected), "\(types)")
            }
            let told = try #require(events.first { $0["type"] as? String == "google.tokens_revoked" })
            let data = told["data"] as? [String: Any]
            #expect(data?["provider"] as? String == "google" && data?["user_id"] as? String == "u-risc")
            #expect(data?["notification_id"] as? String == revoked.jti)
            let audit = try await api.stack.audit()
            #expect(audit.contains { $0.event == "google_security_event" && $0.externalReference == "acct-1" })
            #expect(audit.contains { $0.event == "succeeded" && $0.externalReference == "acct-1" && $0.actor == "google:risc" })
        }
    }

    @Test(arguments: [
        (GoogleSandboxAdmin.Variant.forged, "invalid_key"),
        (.unknownKey, "invalid_key"),
        (.algorithmNone, "invalid_key"),
        (.hmacWithPublicKey, "invalid_key"),
        (.wrongAudience, "invalid_audience"),
        (.wrongIssuer, "invalid_issuer"),
        (.issuedInFuture, "invalid_request"),
        (.tooOld, "invalid_request"),
        (.twoEvents, "invalid_request"),
        (.malformedSubject, "invalid_request"),
        (.criticalHeader, "invalid_request"),
        (.paddedSignature, "invalid_request"),
        (.trailingPeriod, "invalid_request"),
        (.nonCanonicalSignature, "invalid_request"),
    ])
    func aTokenWrongInOneWayIsRefusedWithRFC8935sCodeAndStoresNothing(variant: GoogleSandboxAdmin.Variant, code: String) async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            let live = try await api.stack.enqueue(
                provider: .google,
                clientID: Self.web,
                reference: "acct-1",
                kind: .refreshToken,
                subject: "u-risc",
                userID: "u-risc"
            )
            let sent = try await api.stack.sandbox.google.sendSecurityEvent(
                .init(url: api.baseURL + "/v1/google/risc", audience: Self.web, subject: "u-risc", type: "account-purged", variant: variant)
            )
            #expect(sent.status == 400, "\(variant): \(sent.body)")
            let body = try JSONSerialization.jsonObject(with: Data(sent.body.utf8)) as? [String: Any]
            #expect(body?["err"] as? String == code, "\(sent.body)")
            #expect((body?["description"] as? String)?.isEmpty == false)
            #expect(try await Self.storedEvents(api) == 0)
            #expect(try await api.stack.queue.request(id: live.request.id)?.state == .pending)
        }
    }

    @Test func aBodyThatIsNoTokenIsRefusedAndNoGoogleAppMeansNoReceiver() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            let answer = try await api.call(
                .POST,
                "/v1/google/risc",
                key: nil,
                body: Data("not a token".utf8),
                contentType: "application/secevent+jwt"
            )
            #expect(answer.status == 400)
            #expect(answer.json["err"] as? String == "invalid_request")
        }
        try await APIHarness.with { api in
            let answer = try await api.call(.POST, "/v1/google/risc", key: nil, body: Data("x.y.z".utf8), contentType: "application/secevent+jwt")
            #expect(answer.status == 404)
        }
    }

    @Test func requestsEnqueuedAfterTheEventEndAsTheEventSays() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            let google = api.stack.sandbox.google
            let url = api.baseURL + "/v1/google/risc"
            // The grants exist at Google before the events; the app enqueues their deletion after.
            let purgedGrant = try await google.mintRefreshToken(clientID: Self.web, subject: "u-purged")
            let revokedGrant = try await google.mintRefreshToken(clientID: Self.web, subject: "u-revoked")
            #expect(
                try await google.sendSecurityEvent(.init(url: url, audience: Self.web, subject: "u-purged", type: "account-purged")).status == 202
            )
            #expect(
                try await google.sendSecurityEvent(.init(url: url, audience: Self.web, subject: "u-revoked", type: "tokens-revoked")).status == 202
            )
            for (reference, subject, minted) in [("acct-p", "u-purged", purgedGrant), ("acct-r", "u-revoked", revokedGrant)] {
                api.stack.secrets.add(minted.value)
                _ = try await api.stack.queue.enqueue(
                    try NewRevocation(
                        provider: "google",
                        clientID: Self.web,
                        externalReference: reference,
                        userID: subject,
                        credential: Credential(kind: .refreshToken, secret: minted.value)
                    ),
                    actor: "test"
                )
            }
            _ = try await api.stack.drain()
            let requests = try await api.stack.requests()
            #expect(
                requests.allSatisfy { $0.outcome == .revokedByUser },
                "\(requests.map { "\($0.externalReference) \($0.outcome?.rawValue ?? "-")" })"
            )
            // The purged account's grant is not called about; the revoked one's refusal confirms the event.
            #expect(try await google.grant(purgedGrant.grantID).calls.isEmpty)
            #expect(try await google.grant(revokedGrant.grantID).calls.map(\.status) == [400])
        }
    }

    // MARK: Google's keys are asked for sparingly

    /// Sends `count` genuine security events at once; their statuses.
    static func sendConcurrently(_ api: APIHarness, count: Int) async throws -> [Int] {
        let url = api.baseURL + "/v1/google/risc"
        return try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask {
                    try await api.stack.sandbox.google.sendSecurityEvent(
                        .init(url: url, audience: Self.web, subject: "u-\(index)", type: "sessions-revoked")
                    ).status
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// Fetches of the discovery document and of the key set the Google sandbox answered, by status.
    static func keyFetches(_ api: APIHarness) async throws -> (discovery: [String: Int], certs: [String: Int]) {
        let outcomes = try await api.stack.sandbox.google.statistics().byOutcome
        func fetches(_ endpoint: String) -> [String: Int] { outcomes.filter { $0.key.hasPrefix(endpoint + " ") } }
        return (fetches("/.well-known/risc-configuration"), fetches("/oauth2/v3/certs"))
    }

    @Test func aZeroMaxAgeIsRaisedSoEventsDoNotEachFetchTheDiscoveryDocumentAndTheKeys() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]], google: .init(certsMaxAge: .zero)) { api in
            let url = api.baseURL + "/v1/google/risc"
            for index in 0..<10 {
                let sent = try await api.stack.sandbox.google.sendSecurityEvent(
                    .init(url: url, audience: Self.web, subject: "u-\(index)", type: "sessions-revoked")
                )
                #expect(sent.status == 202, "\(sent.body)")
            }
            #expect(try await Self.sendConcurrently(api, count: 20).allSatisfy { $0 == 202 })
            let fetches = try await Self.keyFetches(api)
            #expect(fetches.discovery == ["/.well-known/risc-configuration 200 -": 1], "\(fetches)")
            #expect(fetches.certs == ["/oauth2/v3/certs 200 -": 1], "\(fetches)")
        }
    }

    /// Google rotates the key that signs its security events and retires the old one at once:
    /// events under the new key, amid a flood of made-up `kid`s (eight at once, as many as the
    /// sandbox's client sends together), wait for the next fetch allowed and are accepted; the
    /// flood makes at most one fetch per interval.
    @Test func eventsSignedWithAKeyGoogleRotatedToAfterTheCacheFilledAreAcceptedAmidAFlood() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            let url = api.baseURL + "/v1/google/risc"
            let google = api.stack.sandbox.google
            #expect(try await google.sendSecurityEvent(.init(url: url, audience: Self.web, subject: "u-0", type: "sessions-revoked")).status == 202)
            let before = try await Self.keyFetches(api).certs.values.reduce(0, +)
            _ = try await google.rotateKeys(retire: true)
            let started = ContinuousClock.now
            let (genuine, forged) = try await withThrowingTaskGroup(of: (Bool, Int).self) { group in
                for index in 1...3 {
                    group.addTask {
                        (
                            true,
                            try await google.sendSecurityEvent(.init(url: url, audience: Self.web, subject: "r-\(index)", type: "sessions-revoked"))
                                .status
                        )
                    }
                }
                for index in 0..<5 {
                    group.addTask {
                        let event = GoogleSandboxAdmin.SecurityEvent(
                            url: url,
                            audience: Self.web,
                            subject: "f-\(index)",
                            type: "sessions-revoked",
                            variant: .unknownKey
                        )
                        return (false, try await google.sendSecurityEvent(event).status)
                    }
                }
                return try await group.reduce(into: ([Int](), [Int]())) { $1.0 ? $0.0.append($1.1) : $0.1.append($1.1) }
            }
            #expect(genuine == [202, 202, 202], "every genuine event is accepted")
            #expect(forged.allSatisfy { $0 == 400 }, "\(forged)")
            #expect(try await Self.storedEvents(api) == 4)
            let intervals = Int((ContinuousClock.now - started) / RS256KeySet.defaultUnknownKeyInterval)
            let made = try await Self.keyFetches(api).certs.values.reduce(0, +) - before
            #expect((1...(1 + intervals)).contains(made), "\(made) fetches over \(intervals + 1) intervals")
        }
    }

    @Test func whileGooglesKeysFailAFloodOfEventsMakesOneFetch() async throws {
        try await APIHarness.with(apps: [.google: [Self.web]]) { api in
            try await api.stack.sandbox.google.setKeyFaults(.init(internalErrorRate: 1))
            let statuses = try await Self.sendConcurrently(api, count: 50)
            #expect(statuses.allSatisfy { $0 == 503 }, "\(statuses)")
            // Sent one after another, within the interval: no fetch at all.
            #expect(try await Self.sendConcurrently(api, count: 1) == [503])
            let fetches = try await Self.keyFetches(api)
            #expect(fetches.discovery == ["/.well-known/risc-configuration 500 -": 1], "\(fetches)")
            #expect(fetches.certs.isEmpty, "\(fetches)")
            #expect(try await Self.storedEvents(api) == 0)
        }
    }

    // MARK: A broken body is the sender's doing

    static let shortTimeouts: [String: any Sendable] = ["header_timeout_seconds": 1, "body_timeout_seconds": 1, "idle_timeout_seconds": 5]

    static func riscHead(length: Int? = nil, chunked: Bool = false) -> String {
        "POST /v1/google/risc HTTP/1.1\r\nHost: test\r\nContent-Type: application/secevent+jwt\r\n"
            + (chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: \(length ?? 0)\r\n") + "\r\n"
    }

    struct BrokenBody: Sendable, CustomTestStringConvertible {
        var name: String
        var request: String
        /// Half-closes after sending (the end of the stream ends the body).
        var finish: Bool
        /// Sends the body one byte at a time after the head.
        var trickle: String?
        var status: Int
        var testDescription: String { name }
    }

    static let brokenBodies: [BrokenBody] = [
        BrokenBody(name: "shorter than Content-Length, left open", request: riscHead(length: 400) + "eyJhbGciOi", finish: false, status: 408),
        BrokenBody(name: "shorter than Content-Length, then a half-close", request: riscHead(length: 400) + "eyJhbGciOi", finish: true, status: 400),
        BrokenBody(name: "an impossible chunk size", request: riscHead(chunked: true) + "ZZZZZZZZ\r\nx.y.z\r\n0\r\n\r\n", finish: true, status: 400),
        BrokenBody(name: "a truncated chunk, then a half-close", request: riscHead(chunked: true) + "80\r\neyJhbGciOi", finish: true, status: 400),
        BrokenBody(
            name: "trickled byte by byte",
            request: riscHead(length: 200),
            finish: false,
            trickle: String(repeating: "eyJhbGciOiJSUzI1NiJ9", count: 10),
            status: 408
        ),
    ]

    @Test(arguments: brokenBodies)
    func aBrokenBodyIsAnswered400Or408AndIsNoKeyFailure(_ broken: BrokenBody) async throws {
        try await APIHarness.with(http: Self.shortTimeouts, apps: [.google: [Self.web]]) { api in
            let port = try #require(URL(string: api.baseURL)?.port)
            let connection = try await RawConnection.open(port: port)
            try await connection.send(broken.request)
            for character in broken.trickle ?? "" {
                if await connection.closes(within: .milliseconds(200)) { break }
                try? await connection.send(String(character))
            }
            if broken.finish { try? await connection.finishSending() }
            #expect(await connection.closes(within: .seconds(20)))
            #expect(connection.text.hasPrefix("HTTP/1.1 \(broken.status)"), "answered \(broken.status): \(connection.text.prefix(80))")
            #expect(!api.stack.logs.all.contains { $0.contains("Could not fetch Google's keys") }, "logged as a key-fetch failure")
            let metrics = try await api.call(.GET, "/metrics", key: nil).text
            #expect(!metrics.contains("keys_unavailable"), "counted as a key-fetch failure")
            #expect(try await Self.storedEvents(api) == 0)
        }
    }
}
