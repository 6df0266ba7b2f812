import AppleSignIn
import AppleSignInSandbox
import Foundation
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

@Suite("Apple's server-to-server notifications, received and told to the app backend")
struct AppleNotificationsAPITests {
    static let notes = "com.example.notes"
    static let photos = "com.example.photos"
    static let relayAddress = "x7k2q9@privaterelay.appleid.com"

    /// Has the sandbox, as Apple, send a notification to the API.
    @discardableResult
    static func notify(
        _ api: APIHarness,
        _ type: String,
        subject: String,
        clientID: String = notes,
        variant: SandboxAdmin.NotificationVariant? = nil,
        path: String = "/v1/apple/notifications"
    ) async throws -> SandboxAdmin.NotificationDelivery {
        try await api.stack.sandbox.admin.sendNotification(
            .init(
                url: api.baseURL + path,
                clientID: clientID,
                subject: subject,
                type: type,
                email: relayAddress,
                isPrivateEmail: true,
                variant: variant
            )
        )
    }

    static func storedNotifications(_ api: APIHarness) async throws -> Int {
        try await ProviderMessages(client: api.stack.database.client, logger: api.stack.logger).count(from: .apple)
    }

    /// The whole event feed as the backend reads it, once it holds `count` events: an event shows
    /// once every older writing transaction in the cluster has ended, and the whole suite shares
    /// the cluster (under load, some of its transactions run for many seconds).
    static func feed(_ api: APIHarness, key: String? = nil, count: Int) async throws -> [[String: Any]] {
        try await eventuallyValue("\(count) events in the feed") {
            let answer = try await api.call(.GET, "/v1/events?limit=1000", key: key ?? api.keys.events)
            #expect(answer.status == 200, "\(answer.text)")
            let events = answer.json["events"] as? [[String: Any]] ?? []
            return events.count >= count ? events : nil
        }
    }

    /// Every event written, visible or not yet.
    static func writtenEvents(_ api: APIHarness) async throws -> Int {
        let rows = try await api.stack.database.client.query("SELECT count(*)::int FROM revoker.outbox_events").collect()
        return try rows.first?.decode(Int.self) ?? -1
    }

    static func data(_ event: [String: Any]) -> [String: Any] { event["data"] as? [String: Any] ?? [:] }

    @Test func eachTypeHasItsEffectAndItsEvent() async throws {
        try await APIHarness.with { api in
            let consent = try await api.stack.enqueue(
                clientID: Self.notes,
                reference: "r-consent",
                kind: .refreshToken,
                subject: "user-consent",
                userID: "user-consent"
            )
            let deleted = try await api.stack.enqueue(
                clientID: Self.notes,
                reference: "r-delete",
                kind: .authorizationCode,
                subject: "user-delete",
                userID: "user-delete"
            )
            try await api.stack.enqueue(
                clientID: Self.notes,
                reference: "r-email",
                kind: .refreshToken,
                subject: "user-email",
                userID: "user-email"
            )
            // Another app's user with the same id is not touched.
            try await api.stack.enqueue(
                clientID: Self.photos,
                reference: "p-consent",
                kind: .refreshToken,
                subject: "user-consent",
                userID: "user-consent"
            )

            for (type, subject) in [
                ("consent-revoked", "user-consent"), ("account-deleted", "user-delete"), ("email-disabled", "user-email"),
                ("email-enabled", "user-email"),
            ] {
                let delivery = try await Self.notify(api, type, subject: subject)
                #expect(delivery.status == 200, "\(type): \(delivery.body)")
                #expect(delivery.body.contains("accepted"), "\(type): \(delivery.body)")
            }

            let requests = try await api.stack.requests()
            let byReference = Dictionary(uniqueKeysWithValues: requests.map { ($0.externalReference, $0) })
            for reference in ["r-consent", "r-delete"] {
                let request = try #require(byReference[reference])
                #expect(
                    request.state == .succeeded && request.outcome == .revokedByUser,
                    "\(reference): \(request.state) \(String(describing: request.outcome))"
                )
                #expect(!request.hasCredential, "\(reference) still holds its credential")
            }
            #expect(byReference["r-email"]?.state == .pending)
            #expect(byReference["p-consent"]?.state == .pending)
            // Nothing was called at Apple for the ended requests; the user ended them there.
            #expect(try await api.stack.sandbox.admin.grant(consent.grantID).calls.isEmpty)
            #expect(try await api.stack.sandbox.admin.grant(deleted.grantID).revokedByUser)

            let audit = try await api.stack.audit()
            #expect(audit.filter { $0.event == "apple_notification" && $0.requestID == nil }.count == 4)
            #expect(audit.contains { $0.event == "apple_notification" && $0.requestID == consent.request.id })
            #expect(audit.contains { $0.event == "credential_erased" && $0.requestID == deleted.request.id })

            let events = try await Self.feed(api, count: 6)
            let types = events.compactMap { $0["type"] as? String }
            #expect(
                types.sorted()
                    == [
                        "apple.account_deleted", "apple.consent_revoked", "apple.email_disabled", "apple.email_enabled",
                        "revocation.succeeded", "revocation.succeeded",
                    ],
                "\(types)"
            )
            let ended = events.filter { $0["type"] as? String == "revocation.succeeded" }.map(Self.data)
            #expect(Set(ended.compactMap { $0["external_reference"] as? String }) == ["r-consent", "r-delete"])
            #expect(ended.allSatisfy { $0["outcome"] as? String == "revoked_by_user" })
            let deletion = try #require(events.first { $0["type"] as? String == "apple.account_deleted" })
            #expect(deletion["client_id"] as? String == Self.notes)
            #expect(Self.data(deletion)["apple_user_id"] as? String == "user-delete")
            #expect(Self.data(deletion)["notification_id"] is String)
            #expect(Self.data(deletion)["event_time"] is String)
            // The relay address is neither stored nor passed on.
            let feedText = try await api.call(.GET, "/v1/events?limit=1000", key: api.keys.events).text
            #expect(!feedText.contains("privaterelay"))
            let stored = try await api.stack.database.client.query("SELECT row_to_json(n)::text FROM revoker.apple_notifications n").collect()
            #expect(stored.count == 4)
            for row in stored { #expect(!(try row.decode(String.self)).contains("privaterelay")) }
        }
    }

    @Test func notificationsThatDoNotVerifyAreRefusedAndStoreNothing() async throws {
        try await APIHarness.with { api in
            try await api.stack.enqueue(clientID: Self.notes, reference: "r-1", kind: .refreshToken, subject: "user-1", userID: "user-1")
            let refusals: [(SandboxAdmin.NotificationVariant, String)] = [
                (.forged, "invalid_signature"), (.unknownKey, "unknown_signing_key"), (.algorithmNone, "unsupported_algorithm"),
                (.hmacWithPublicKey, "unsupported_algorithm"), (.wrongIssuer, "wrong_issuer"), (.wrongAudience, "wrong_audience"),
                (.issuedInFuture, "issued_in_future"), (.expired, "expired_notification"), (.malformedEvents, "malformed_notification"),
            ]
            for (variant, _) in refusals {
                let delivery = try await Self.notify(api, "account-delete", subject: "user-1", variant: variant)
                #expect(delivery.status == 400, "\(variant): \(delivery.status) \(delivery.body)")
                #expect(delivery.body.contains("\"field\":\"payload\""), "\(variant): \(delivery.body)")
                // Nothing of the token comes back: no base64url JSON, no subject.
                #expect(!delivery.body.contains("eyJ") && !delivery.body.contains("user-1"), "\(variant): \(delivery.body)")
            }
            // Bodies that are not a notification at all; no key needed, none given.
            let oversized = Data(("{\"payload\":\"" + String(repeating: "a", count: 20_000) + "\"}").utf8)
            let bodies: [(Data, String)] = [
                (oversized, "larger than"), (Data("not json".utf8), "well-formed JSON"), (Data("{}".utf8), "payload"),
                (Data("{\"payload\":42}".utf8), "payload"), (Data("{\"payload\":\"a.b.c\"}".utf8), "well-formed JWS"),
            ]
            for (body, words) in bodies {
                let answer = try await api.call(.POST, "/v1/apple/notifications", key: nil, body: body)
                #expect(answer.status == 400, "\(words): \(answer.status) \(answer.text)")
                #expect(answer.text.contains(words), "\(answer.text)")
            }
            #expect(try await Self.storedNotifications(api) == 0)
            #expect(try await Self.writtenEvents(api) == 0)
            #expect(try await api.stack.requests().first?.state == .pending)

            // Every refusal is counted by its reason.
            let metrics = try await api.call(.GET, "/metrics", key: nil).text
            for (_, code) in refusals {
                #expect(metrics.contains("revoker_apple_notifications_total{result=\"\(code)\"}"), "\(code) not counted")
            }
            // The last body is JSON with a payload, refused by the verifier rather than as a body.
            #expect(metrics.contains("revoker_apple_notifications_total{result=\"malformed_body\"} 4"))
            #expect(metrics.contains("revoker_apple_notifications_total{result=\"malformed_notification\"} 2"))
        }
    }

    @Test func aReplayedNotificationIsAnswered200AndChangesNothing() async throws {
        try await APIHarness.with { api in
            let first = try await Self.notify(api, "consent-revoked", subject: "user-r")
            #expect(first.status == 200 && first.body.contains("accepted"), "\(first.body)")
            let again = try await api.stack.sandbox.admin.replayNotification(jti: first.jti)
            #expect(again.status == 200 && again.body.contains("duplicate"), "\(again.body)")
            #expect(try await Self.storedNotifications(api) == 1)
            #expect(try await Self.writtenEvents(api) == 1)
            #expect(try await api.stack.audit().filter { $0.event == "apple_notification" }.count == 1)
        }
    }

    @Test func anAppsOwnURLTakesOnlyThatAppsNotifications() async throws {
        try await APIHarness.with { api in
            let own = try await Self.notify(api, "email-enabled", subject: "u", path: "/v1/apple/notifications/\(Self.notes)")
            #expect(own.status == 200, "\(own.body)")
            let other = try await Self.notify(api, "email-enabled", subject: "u", path: "/v1/apple/notifications/\(Self.photos)")
            #expect(other.status == 400 && other.body.contains("another app"), "\(other.body)")
            #expect(try await Self.storedNotifications(api) == 1)
        }
    }

    @Test func anUnknownAppsURLAnswersAsAKnownOneSoBundleIDsCannotBeEnumerated() async throws {
        try await APIHarness.with { api in
            let unknownPath = "/v1/apple/notifications/com.example.unknown"
            let knownPath = "/v1/apple/notifications/\(Self.photos)"
            // A genuine notification for another app, at a known and at an unknown app's URL.
            let known = try await Self.notify(api, "account-delete", subject: "u", path: knownPath)
            let unknown = try await Self.notify(api, "account-delete", subject: "u", path: unknownPath)
            #expect(known.status == 400, "\(known.body)")
            #expect(unknown.status == known.status && unknown.body == known.body, "\(unknown.status) \(unknown.body) vs \(known.body)")
            // A notification addressed to the unknown app itself, and bodies that are no notification.
            let addressed = try await Self.notify(api, "account-delete", subject: "u", clientID: "com.example.unknown", path: unknownPath)
            #expect(addressed.status == 400 && addressed.body == known.body, "\(addressed.status) \(addressed.body)")
            for body in ["{\"payload\":\"a.b.c\"}", "not json", "{}"] {
                let atKnown = try await api.call(.POST, knownPath, key: nil, body: Data(body.utf8))
                let atUnknown = try await api.call(.POST, unknownPath, key: nil, body: Data(body.utf8))
                #expect(atKnown.status == 400 && atUnknown.status == atKnown.status, "\(body): \(atKnown.status) vs \(atUnknown.status)")
                #expect(atUnknown.text == atKnown.text, "\(body): \(atUnknown.text) vs \(atKnown.text)")
                #expect(atUnknown.headers.first(name: "Content-Type") == atKnown.headers.first(name: "Content-Type"))
            }
            #expect(try await Self.storedNotifications(api) == 0)
            #expect(try await Self.writtenEvents(api) == 0)
        }
    }

    @Test(arguments: [SandboxAdmin.NotificationVariant.criticalHeader, .paddedSignature, .trailingPeriod, .nonCanonicalSignature])
    func aCriticalHeaderOrBytesAroundTheSignatureAreRefused(_ variant: SandboxAdmin.NotificationVariant) async throws {
        try await APIHarness.with { api in
            try await api.stack.enqueue(clientID: Self.notes, reference: "r-1", kind: .refreshToken, subject: "user-1", userID: "user-1")
            let delivery = try await Self.notify(api, "account-delete", subject: "user-1", variant: variant)
            #expect(delivery.status == 400, "\(variant): \(delivery.status) \(delivery.body)")
            #expect(delivery.body.contains("\"field\":\"payload\""), "\(delivery.body)")
            #expect(try await Self.storedNotifications(api) == 0)
            #expect(try await api.stack.requests().first?.state == .pending)
        }
    }

    // MARK: Apple's keys are asked for sparingly

    /// Sends `count` notifications signed under a `kid` Apple does not publish, all at once; their statuses.
    static func unknownKeys(_ api: APIHarness, count: Int) async throws -> [Int] {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<count {
                group.addTask { try await Self.notify(api, "email-enabled", subject: "u-\(index)", variant: .unknownKey).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test func whileApplesKeysFailAFloodOfUnknownKidsMakesOneFetch() async throws {
        try await APIHarness.with { api in
            try await api.stack.sandbox.admin.setKeyFaults(.init(internalErrorRate: 1))
            let statuses = try await Self.unknownKeys(api, count: 100)
            #expect(statuses.allSatisfy { $0 == 503 }, "\(statuses)")
            // A failed fetch holds off the next one as a successful one does.
            #expect(try await Self.unknownKeys(api, count: 10).allSatisfy { $0 == 503 })
            let fetches = try await api.stack.sandbox.admin.statistics().byOutcome.filter { $0.key.hasPrefix("/auth/keys ") }
            #expect(fetches == ["/auth/keys 500 -": 1], "\(fetches)")
            #expect(try await Self.storedNotifications(api) == 0)
        }
    }

    @Test func onceApplesKeysAreCachedAFloodOfUnknownKidsAndAZeroMaxAgeMakeOneFurtherFetch() async throws {
        try await APIHarness.with(sandbox: .init(keysMaxAge: .zero)) { api in
            #expect(try await Self.notify(api, "email-enabled", subject: "u-0").status == 200)
            for index in 1...5 { #expect(try await Self.notify(api, "email-enabled", subject: "u-\(index)").status == 200) }
            // The made-up kids wait for the next fetch allowed for an unknown key, and share it (as
            // many as the sandbox sends at once: its client holds eight connections).
            let started = ContinuousClock.now
            let statuses = try await Self.unknownKeys(api, count: 8)
            #expect(statuses.allSatisfy { $0 == 400 }, "\(statuses)")
            try await Self.expectOneFetchPerInterval(api, after: 1, since: started)
        }
    }

    @Test func notificationsSignedWithAKeyAppleRotatedToAfterTheCacheFilledAreAcceptedAmidAFlood() async throws {
        try await APIHarness.with { api in
            #expect(try await Self.notify(api, "email-enabled", subject: "u-0").status == 200)
            // Apple rotates and retires the old key at once; Apple does not send a notification twice.
            _ = try await api.stack.sandbox.admin.rotateKeys(retire: true)
            let started = ContinuousClock.now
            let (genuine, forged) = try await withThrowingTaskGroup(of: (Bool, Int).self) { group in
                for index in 1...3 {
                    group.addTask { (true, try await Self.notify(api, "consent-revoked", subject: "rotated-\(index)").status) }
                }
                // Eight at once: as many as the sandbox's client sends together.
                for index in 0..<5 {
                    group.addTask { (false, try await Self.notify(api, "email-enabled", subject: "f-\(index)", variant: .unknownKey).status) }
                }
                return try await group.reduce(into: ([Int](), [Int]())) { $1.0 ? $0.0.append($1.1) : $0.1.append($1.1) }
            }
            #expect(genuine == [200, 200, 200], "every genuine message is accepted")
            #expect(forged.allSatisfy { $0 == 400 }, "\(forged)")
            #expect(try await Self.storedNotifications(api) == 4)
            try await Self.expectOneFetchPerInterval(api, after: 1, since: started)
        }
    }

    /// Every fetch of Apple's keys succeeded, and since `started` (when `before` had been made)
    /// at most one more began per interval allowed for unknown keys: one when everything arrived
    /// within one interval, as it does unless the machine is very slow.
    static func expectOneFetchPerInterval(_ api: APIHarness, after before: Int, since started: ContinuousClock.Instant) async throws {
        let intervals = Int((ContinuousClock.now - started) / RS256KeySet.defaultUnknownKeyInterval)
        let fetches = try await api.stack.sandbox.admin.statistics().byOutcome.filter { $0.key.hasPrefix("/auth/keys ") }
        #expect(fetches.keys.sorted() == ["/auth/keys 200 -"], "\(fetches)")
        let made = fetches.values.reduce(0, +) - before
        #expect((1...(1 + intervals)).contains(made), "\(made) fetches over \(intervals + 1) intervals")
    }

    @Test func aDatabaseOutageAnswers503SoThatNothingAnswered200IsLost() async throws {
        try await PrivatePostgres.with { server in
            try await APIHarness.with(http: ["database_timeout_seconds": 3], server: server.url) { api in
                // Apple's keys are cached by a first notification.
                #expect(try await Self.notify(api, "email-enabled", subject: "u-0").status == 200)
                try server.stop()
                let during = try await Self.notify(api, "account-delete", subject: "u-1")
                try server.start()
                #expect(during.status == 503, "\(during.body)")
                // Sent again once the database is back (the pool may take a moment to reconnect), it is stored.
                let after = try await eventuallyValue("the replay is no longer refused", every: .milliseconds(200)) {
                    let after = try await api.stack.sandbox.admin.replayNotification(jti: during.jti)
                    return after.status == 503 ? nil : after
                }
                #expect(after.status == 200 && after.body.contains("accepted"), "\(after.body)")
                #expect(try await Self.storedNotifications(api) == 2)
            }
        }
    }

    @Test func theEventFeedPagesByCursorAndKeepsToTheKeysApps() async throws {
        try await APIHarness.with { api in
            for index in 0..<3 {
                try await Self.notify(api, "email-disabled", subject: "n-\(index)")
                try await Self.notify(api, "email-disabled", subject: "p-\(index)", clientID: Self.photos)
            }
            #expect(try await Self.feed(api, count: 6).count == 6)
            let first = try await api.call(.GET, "/v1/events?limit=4", key: api.keys.events)
            let page = try #require(first.json["events"] as? [[String: Any]])
            #expect(page.count == 4)
            let cursor = try #require(first.json["next_cursor"] as? String)
            #expect(first.headers.first(name: "Revoker-Next-Cursor") == cursor)
            let rest = try await api.call(.GET, "/v1/events?after=\(cursor)", key: api.keys.events)
            let remaining = try #require(rest.json["events"] as? [[String: Any]])
            #expect(remaining.count == 2)
            let ids = (page + remaining).compactMap { $0["id"] as? String }
            #expect(Set(ids).count == 6)
            // Nothing new: the same cursor comes back.
            let last = try #require(rest.json["next_cursor"] as? String)
            let idle = try await api.call(.GET, "/v1/events?after=\(last)", key: api.keys.events)
            #expect((idle.json["events"] as? [Any])?.isEmpty == true && idle.json["next_cursor"] as? String == last)

            let notesOnly = try await Self.feed(api, key: api.keys.notesOnly, count: 3)
            #expect(notesOnly.count == 3 && notesOnly.allSatisfy { $0["client_id"] as? String == Self.notes })
            #expect(try await api.call(.GET, "/v1/events?client_id=\(Self.photos)", key: api.keys.notesOnly).status == 403)
            #expect(try await api.call(.GET, "/v1/events", key: api.keys.auditor).status == 403)
            #expect(try await api.call(.GET, "/v1/events", key: nil).status == 401)
            let bad = try await api.call(.GET, "/v1/events?after=abc", key: api.keys.events)
            #expect(bad.status == 400 && bad.text.contains("after"), "\(bad.text)")
        }
    }

    @Test func aLaterRequestForAUserWhoLeftEndsTheSameWay() async throws {
        try await APIHarness.with { api in
            let before = try await api.mintRefreshToken(subject: "left")
            #expect(try await Self.notify(api, "account-delete", subject: "gone").status == 200)
            #expect(try await Self.notify(api, "consent-revoked", subject: "left").status == 200)
            // Enqueued afterwards: a grant of the deleted account, the grant the user revoked,
            // and one from signing in again after revoking.
            let gone = try await api.stack.enqueue(clientID: Self.notes, reference: "gone", kind: .refreshToken, subject: "gone", userID: "gone")
            let body: [String: Any] = [
                "client_id": Self.notes, "external_reference": "left-before", "refresh_token": before.token, "apple_user_id": "left",
            ]
            #expect(try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body).status == 202)
            let back = try await api.stack.enqueue(clientID: Self.notes, reference: "back", kind: .refreshToken, subject: "left", userID: "left")
            _ = try await api.stack.drain()

            let requests = Dictionary(uniqueKeysWithValues: try await api.stack.requests().map { ($0.externalReference, $0) })
            #expect(requests["gone"]?.outcome == .revokedByUser)
            #expect(try await api.stack.sandbox.admin.grant(gone.grantID).calls.isEmpty, "Apple was called for a deleted account")
            // The revoked grant: Apple's refusal confirms what the notification said.
            #expect(requests["left-before"]?.outcome == .revokedByUser)
            #expect(try await api.stack.sandbox.admin.grant(before.grantID).revocations == 0)
            // Signed in again after revoking: a live grant, revoked as usual.
            #expect(requests["back"]?.outcome == .revoked)
            #expect(try await api.stack.sandbox.admin.grant(back.grantID).revocations == 1)
        }
    }
}
