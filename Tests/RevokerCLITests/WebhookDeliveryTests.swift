import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import PostgresNIO
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Events delivered to the app backend's webhook")
struct WebhookDeliveryTests {
    static let notes = "com.example.notes"

    static func settings(_ receiver: WebhookReceiver, park: Double = 3600) -> [String: any Sendable] {
        let delivery: [String: any Sendable] = [
            "retry_base_seconds": 0.05, "retry_cap_seconds": 0.2, "poll_interval_seconds": 0.2, "from_start": true, "park_after_seconds": park,
        ]
        return ["webhooks": [receiver.configurationEntry(name: "notes-backend", clientIDs: [notes])], "webhook_delivery": delivery]
    }

    /// The ids of the requests' events the endpoint should get, in feed order. The
    /// `audit.checkpoint` events each run's checkpoints add (its last one after its deliveries)
    /// are `AuditWitnessTests`' concern.
    static func expectedIDs(_ stack: RevokerTestStack) async throws -> [String] {
        let feed = EventFeed(client: stack.database.client, logger: stack.logger)
        return try await feed.events(after: nil, clientIDs: [notes], limit: 1000).filter { !$0.type.hasPrefix("audit.") }
            .map { $0.id.uuidString.lowercased() }
    }

    /// The deliveries of the requests' events, without the checkpoints'.
    static func outcomes(_ receiver: WebhookReceiver) -> [WebhookReceiver.Delivery] {
        receiver.deliveries.filter { ($0.event["type"] as? String)?.hasPrefix("audit.") != true }
    }

    /// Waits until the endpoint has accepted `count` distinct events of requests.
    static func waitForAccepted(_ receiver: WebhookReceiver, count: Int, timeout: Duration = .seconds(90)) async throws {
        let deadline = ContinuousClock.now + timeout
        while Set(outcomes(receiver).filter { (200..<300).contains($0.answered) }.map(\.id)).count < count {
            guard ContinuousClock.now < deadline else {
                Issue.record(
                    "only \(Set(outcomes(receiver).filter { (200..<300).contains($0.answered) }.map(\.id)).count) of \(count) events accepted"
                )
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    @Test func eventsArriveSignedInOrderAndFailuresAreRetriedThenParkedThenResumed() async throws {
        try await WebhookReceiver.with { receiver in
            // The endpoint fails five times, twice asking for a pause, then accepts. The first pause
            // makes the later failures come after park_after_seconds; during the second (3 s, long
            // enough to be seen on a loaded machine) it shows as parked.
            receiver.plan { index in
                index == 1 ? .retryAfter(seconds: 1) : index == 4 ? .retryAfter(seconds: 3) : index < 4 ? .status(500) : .status(204)
            }
            let key = "rvk_test_" + UUID().uuidString
            let digest = SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
            let apiKey: [String: any Sendable] = ["name": "backend", "sha256": digest, "scopes": ["events:read"]]
            let http: [String: any Sendable] = ["port": 0, "api_keys": [apiKey]]
            try await RevokerTestStack.with(http: http, settings: Self.settings(receiver, park: 0.3), serving: [.api, .worker]) { stack in
                for index in 0..<5 {
                    try await stack.enqueue(clientID: Self.notes, reference: "n-\(index)", kind: .refreshToken)
                }
                try await stack.enqueue(clientID: "com.example.photos", reference: "p-0", kind: .refreshToken)
                // Failing for longer than park_after_seconds, the endpoint shows as parked.
                let deliveries = WebhookDeliveries(client: stack.database.client, logger: stack.logger)
                var sawParked = false
                // Only a hang guard: a loaded machine may take long to start delivering at all.
                let deadline = ContinuousClock.now + .seconds(120)
                while !sawParked, Self.outcomes(receiver).count < 6, ContinuousClock.now < deadline {
                    sawParked = try await deliveries.states().first?.parkedSince != nil
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(sawParked, "the failing endpoint was shown as parked")
                try await Self.waitForAccepted(receiver, count: 5)

                let received = receiver.deliveries
                #expect(received.allSatisfy { $0.signatureValid }, "every delivery is signed with the endpoint's secret")
                #expect(received.allSatisfy { $0.clientID == Self.notes }, "only the endpoint's apps' events")
                // The first event was sent until accepted, always as the same message.
                try #require(received.count >= 6)
                #expect(Set(received.prefix(6).map(\.id)).count == 1, "\(received.prefix(6).map(\.id))")
                #expect(received.prefix(6).map(\.answered) == [500, 429, 500, 500, 429, 204])
                #expect(received[2].receivedAt.timeIntervalSince(received[1].receivedAt) >= 0.95, "Retry-After was honoured")
                #expect(received[5].receivedAt.timeIntervalSince(received[4].receivedAt) >= 2.95, "Retry-After was honoured")
                // In feed order, none missing.
                let accepted = received.filter { (200..<300).contains($0.answered) }.map(\.id)
                let expected = try await Self.expectedIDs(stack)
                #expect(accepted == expected)

                // The cursor moves just after the receiver has answered: wait for it.
                var state = try #require(try await deliveries.states().first)
                let settled = ContinuousClock.now + .seconds(30)
                while state.delivered < 5, ContinuousClock.now < settled {
                    try await Task.sleep(for: .milliseconds(50))
                    state = try #require(try await deliveries.states().first)
                }
                #expect(state.endpoint == "notes-backend" && state.delivered == 5 && state.attempts == 0)
                #expect(state.parkedSince == nil && state.failingSince == nil, "a 2xx resumes a parked endpoint")

                // The API shows the same, and so do the metrics.
                var request = HTTPClientRequest(url: (stack.apiBaseURL ?? "") + "/v1/events/deliveries")
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                let body = try await response.body.collect(upTo: 1024 * 1024)
                let listed = try #require(
                    (try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])?["deliveries"] as? [[String: Any]]
                )
                #expect(listed.count == 1 && listed.first?["endpoint"] as? String == "notes-backend")
                #expect(listed.first?["delivered"] as? Int == 5 && listed.first?["parked"] as? Bool == false)
                let metrics = try await HTTPClient.shared.execute(
                    HTTPClientRequest(url: (stack.apiBaseURL ?? "") + "/metrics"),
                    timeout: .seconds(30)
                )
                let exposition = String(buffer: try await metrics.body.collect(upTo: 1024 * 1024))
                #expect(exposition.contains("revoker_webhook_parked{endpoint=\"notes-backend\"} 0"), "\(exposition)")

                // The README's shell check of a signature agrees with the one sent.
                let sample = try #require(received.last)
                #expect(try Self.readmeSignature(of: sample, secretFile: receiver.secretFile) == sample.signature)
            }
        }
    }

    /// One app's endpoint answers 200 and then trickles its body; another app's endpoint is
    /// healthy. The healthy one gets its events while the slow one is still trickling, and the
    /// slow exchange is cut at the timeout, recorded as a failure and sent again.
    @Test func aSlowEndpointHoldsNeitherAnotherEndpointNorItsOwnLeasePastTheTimeout() async throws {
        let photos = "com.example.photos"
        try await WebhookReceiver.with { healthy in
            try await TricklingEndpoint.with(contentLength: 1000, every: .milliseconds(100)) { slow in
                let delivery: [String: any Sendable] = [
                    "timeout_seconds": 20, "retry_base_seconds": 0.05, "retry_cap_seconds": 0.2, "poll_interval_seconds": 0.2, "from_start": true,
                ]
                let settings: [String: any Sendable] = [
                    "webhooks": [
                        slow.configurationEntry(name: "notes-backend", secretFile: healthy.secretFile, clientIDs: [Self.notes]),
                        healthy.configurationEntry(name: "photos-backend", clientIDs: [photos]),
                    ],
                    "webhook_delivery": delivery,
                ]
                try await RevokerTestStack.with(settings: settings, serving: [.worker]) { stack in
                    try await stack.enqueue(clientID: Self.notes, reference: "slow-0", kind: .refreshToken)
                    try await waitUntil("the slow endpoint answers") { !slow.exchanges.isEmpty }

                    try await stack.enqueue(clientID: photos, reference: "fast-0", kind: .refreshToken)
                    try await waitUntil("the other app's request is revoked") {
                        try await stack.requests().contains { $0.externalReference == "fast-0" && $0.state.isFinal }
                    }
                    // Its event is readable once every transaction before it has ended (busy when other tests run).
                    let feed = EventFeed(client: stack.database.client, logger: stack.logger)
                    var expected: [String] = []
                    try await waitUntil("the other app's event is in the feed") {
                        expected = try await feed.events(after: nil, clientIDs: [photos], limit: 1000)
                            .filter { !$0.type.hasPrefix("audit.") }.map { $0.id.uuidString.lowercased() }
                        return !expected.isEmpty
                    }
                    try await Self.waitForAccepted(healthy, count: expected.count)
                    let lastHealthy = try #require(Self.outcomes(healthy).last)
                    let first = try #require(slow.exchanges.first)
                    #expect(
                        first.closedAt.map { lastHealthy.receivedAt < $0 } ?? true,
                        "the healthy endpoint had its events while the slow one was still trickling"
                    )
                    #expect(healthy.deliveries.allSatisfy { $0.clientID == photos && $0.signatureValid })

                    // The slow exchange is cut before its body is whole, and the same event is sent again.
                    try await waitUntil("the slow delivery is retried") { slow.exchanges.count >= 2 }
                    let cut = try #require(slow.exchanges.first)
                    #expect(cut.closedAt != nil && cut.bodyBytesSent < slow.contentLength, "the client gave up on the trickle")
                    #expect(slow.exchanges[1].webhookID == cut.webhookID, "the same event again: nothing skipped")
                    let states = try await WebhookDeliveries(client: stack.database.client, logger: stack.logger).states()
                    let slowState = try #require(states.first { $0.endpoint == "notes-backend" })
                    #expect(slowState.delivered == 0 && slowState.failingSince != nil, "\(slowState)")
                    #expect(slowState.lastError?.contains("timeout") == true, "\(slowState.lastError ?? "-")")
                    // At least those (a slow machine may have signed a checkpoint, an event too, meanwhile).
                    #expect((states.first { $0.endpoint == "photos-backend" }?.delivered ?? 0) >= Int64(expected.count))
                }
            }
        }
    }

    @Test func aDrainExitsOnceTheEndpointHasItsEventsOrFails() async throws {
        try await WebhookReceiver.with { receiver in
            var settings = Self.settings(receiver)
            settings["webhook_delivery"] = ["poll_interval_seconds": 5, "drain_seconds": 3600, "retry_base_seconds": 600] as [String: any Sendable]
            try await RevokerTestStack.with(settings: settings) { stack in
                for index in 0..<5 {
                    try await stack.enqueue(clientID: Self.notes, reference: "d-\(index)", kind: .refreshToken)
                }
                // The drain's own events reach the endpoint before it exits, not at the next run.
                let first = try await RevokerProcess.run(["drain"], environment: stack.environment)
                #expect(first.status == 0, "\(first.stderr.suffix(1000))")
                let expected = try await Self.expectedIDs(stack)
                #expect(expected.count == 5)
                #expect(Self.outcomes(receiver).filter { (200..<300).contains($0.answered) }.map(\.id) == expected)

                // An endpoint that fails does not hold the drain for drain_seconds: its events wait.
                receiver.plan { _ in .status(503) }
                try await stack.enqueue(clientID: Self.notes, reference: "d-5", kind: .refreshToken)
                let second = try await RevokerProcess.run(["drain"], environment: stack.environment, timeout: .seconds(120))
                #expect(second.status == 0, "\(second.stderr.suffix(1000))")
                #expect(receiver.deliveries.last?.answered == 503)
                let state = try #require(try await WebhookDeliveries(client: stack.database.client, logger: stack.logger).states().first)
                #expect(state.delivered == 5 && state.attempts == 1 && state.failingSince != nil)
            }
        }
    }

    @Test func pruneDeletesOldEventsOnlyOnceEveryEndpointHasThem() async throws {
        try await WebhookReceiver.with { receiver in
            var settings = Self.settings(receiver)
            settings["webhook_delivery"] = ["poll_interval_seconds": 0.2, "retry_base_seconds": 600, "from_start": true] as [String: any Sendable]
            try await RevokerTestStack.with(settings: settings) { stack in
                for index in 0..<3 {
                    try await stack.enqueue(clientID: Self.notes, reference: "old-\(index)", kind: .refreshToken)
                }
                let delivered = try await RevokerProcess.run(["drain"], environment: stack.environment, timeout: .seconds(300))
                #expect(delivered.status == 0, "\(delivered.stderr.suffix(1000))")
                // A fourth event the endpoint refuses stays behind its cursor.
                receiver.plan { _ in .status(503) }
                try await stack.enqueue(clientID: Self.notes, reference: "old-3", kind: .refreshToken)
                let refused = try await RevokerProcess.run(["drain"], environment: stack.environment, timeout: .seconds(300))
                #expect(refused.status == 0, "\(refused.stderr.suffix(1000))")
                // Readable once every transaction before them has ended (busy when other tests run).
                var all: [String] = []
                try await waitUntil("the four events in the feed") {
                    all = try await Self.expectedIDs(stack)
                    return all.count >= 4
                }
                try #require(all.count == 4)

                // All four are made 100 days old (as the database's owner, past the outbox's trigger).
                _ = try await stack.database.client.query(
                    """
                    DO $$ BEGIN
                        SET LOCAL session_replication_role = replica;
                        UPDATE revoker.outbox_events SET occurred_at = occurred_at - interval '100 days';
                    END $$
                    """,
                    logger: stack.logger
                ).collect()
                let result = try await RevokerProcess.run(["prune", "--older-than-days", "90", "--json"], environment: stack.environment)
                #expect(result.status == 0, "\(result.stderr)")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                #expect(object["events_pruned"] as? Int == 3)
                #expect(try await Self.expectedIDs(stack) == [all[3]], "the event the endpoint has not received is kept")

                // Without the prune function the outbox still refuses a DELETE.
                let error = await #expect(throws: PSQLError.self) {
                    _ = try await stack.database.client.query("DELETE FROM revoker.outbox_events", logger: stack.logger).collect()
                }
                #expect(error?.serverInfo?[.sqlState] == "RV403")
                #expect(try await Self.expectedIDs(stack).count == 1)
            }
        }
    }

    /// The README's shell blocks about webhooks: the `sign-webhook` script and the curl example.
    static func readmeWebhookBlocks() throws -> (sign: String, curl: String) {
        let readme = try String(contentsOf: PrivatePostgres.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = readme.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
        return (
            try #require(blocks.first { $0.hasPrefix("# sign-webhook") }),
            try #require(blocks.first { $0.contains("curl") && $0.contains("sign-webhook") })
        )
    }

    /// Runs `script` with sh in a directory holding the README's files: `sign-webhook`, the
    /// endpoint's secret as `notes-webhook-secret`, and `body` as `body.json`. Returns its output.
    static func runReadmeShell(_ script: String, body: String, secretFile: String, environment: [String: String] = [:]) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(try readmeWebhookBlocks().sign.utf8).write(to: directory.appendingPathComponent("sign-webhook"))
        try FileManager.default.copyItem(atPath: secretFile, toPath: directory.appendingPathComponent("notes-webhook-secret").path)
        try Data(body.utf8).write(to: directory.appendingPathComponent("body.json"))
        let (_, text) = try ChildProcess.runBlocking(
            "/bin/sh",
            ["-c", script],
            environment: environment.merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 },
            workingDirectory: directory.path
        )
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The README's `sign-webhook` over a delivery, as printed.
    static func readmeSignature(of delivery: WebhookReceiver.Delivery, secretFile: String) throws -> String {
        try runReadmeShell(
            #"sh sign-webhook notes-webhook-secret "$id" "$ts" body.json"#,
            body: delivery.body,
            secretFile: secretFile,
            environment: ["id": delivery.id, "ts": String(delivery.timestamp)]
        )
    }

    @Test func theReadmesCurlExamplePostsAnEventThatVerifies() async throws {
        try await WebhookReceiver.with { receiver in
            let sample = #"{"id":"5b0c2d1e-0000-4000-8000-000000000001","type":"revocation.succeeded","client_id":"com.example.notes"}"#
            let curl = try Self.readmeWebhookBlocks().curl.replacingOccurrences(of: "https://notes.example.com/hooks/revoker", with: receiver.url)
            _ = try Self.runReadmeShell(curl, body: sample, secretFile: receiver.secretFile)
            let delivery = try #require(receiver.deliveries.first)
            #expect(delivery.signatureValid, "the README's curl example signs as Revoker does")
            #expect(delivery.body == sample && delivery.id.hasPrefix("msg_test_") && delivery.answered == 204)
        }
    }

    @Test func noEventIsLostAcrossAKilledWorkerAndADatabaseRestart() async throws {
        try await PrivatePostgres.with { server in
            try await WebhookReceiver.with { receiver in
                // The fourth delivery is slow: the worker sending it is killed while it waits.
                receiver.plan { index in index == 3 ? .slow(.seconds(3)) : .status(200) }
                let worker: [String: any Sendable] = [
                    "lease_seconds": 5, "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1,
                ]
                var settings = Self.settings(receiver)
                settings["webhook_delivery"] =
                    [
                        "retry_base_seconds": 0.05, "retry_cap_seconds": 0.5, "poll_interval_seconds": 0.2, "from_start": true, "lease_seconds": 5,
                        "timeout_seconds": 2,
                    ] as [String: any Sendable]
                try await RevokerTestStack.with(worker: worker, settings: settings, server: server.url) { stack in
                    for index in 0..<8 {
                        try await stack.enqueue(clientID: Self.notes, reference: "a-\(index)", kind: .refreshToken)
                    }
                    let first = try RevokerProcess(["work", "--log-level", "info"], environment: stack.environment)
                    let deadline = ContinuousClock.now + .seconds(60)
                    while Self.outcomes(receiver).count < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
                    try await Task.sleep(for: .milliseconds(500))
                    first.signal(SIGKILL)
                    _ = try? await first.wait(timeout: .seconds(10))

                    // Another worker takes over once the endpoint's lease expires, and lives through a
                    // database restart while it delivers.
                    let second = try RevokerProcess(["work", "--log-level", "info"], environment: stack.environment)
                    let more = ContinuousClock.now + .seconds(60)
                    while Self.outcomes(receiver).count < 6, ContinuousClock.now < more { try await Task.sleep(for: .milliseconds(50)) }
                    try server.stop()
                    try await Task.sleep(for: .seconds(1))
                    try server.start()
                    for index in 0..<4 {
                        // The test's own pool reconnects after the restart; its first calls may fail.
                        for attempt in 1...40 {
                            do {
                                try await stack.enqueue(clientID: Self.notes, reference: "b-\(index)", kind: .refreshToken)
                                break
                            } catch  where attempt < 40 {
                                try await Task.sleep(for: .milliseconds(500))
                            }
                        }
                    }
                    try await Self.waitForAccepted(receiver, count: 12)
                    second.signal(SIGTERM)
                    let ended = try await second.wait(timeout: .seconds(60))
                    #expect(ended.status == 0, "\(ended.stderr.suffix(1000))")

                    let expected = try await Self.expectedIDs(stack)
                    #expect(expected.count == 12)
                    let deliveries = receiver.deliveries
                    #expect(deliveries.allSatisfy { $0.signatureValid })
                    // Every event arrived, first arrivals in feed order.
                    var firstArrivals: [String] = []
                    for delivery in Self.outcomes(receiver) where !firstArrivals.contains(delivery.id) { firstArrivals.append(delivery.id) }
                    #expect(firstArrivals == expected)
                    // Repeats only of what was in flight: at the kill, and (when a 2xx came back while the
                    // database was down, so the cursor could not move) at the restart; each the same message.
                    let repeats = Dictionary(grouping: deliveries, by: \.id).filter { $0.value.count > 1 }
                    #expect(repeats.count <= 2, "repeated: \(repeats.keys.sorted())")
                    #expect(repeats.values.allSatisfy { Set($0.map(\.body)).count == 1 })
                    print("webhook repeats after SIGKILL: \(repeats.count) event(s), \(repeats.values.map(\.count).reduce(0, +)) deliveries")
                }
            }
        }
    }
}
