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

@Suite("Events delivered to the app backend's webhook")
struct WebhookDeliveryTests {
    static let notes = "com.example.notes"

    static func settings(_ receiver: WebhookReceiver, park: Double = 3600) -> [String: any Sendable] {
        receiver.settings(name: "notes-backend", clientIDs: [notes], park: park)
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
                try await eventually("the endpoint parked, or its sixth delivery", every: .milliseconds(20)) {
                    sawParked = try await deliveries.states().first?.parkedSince != nil
                    return sawParked || receiver.requestDeliveries.count >= 6
                }
                #expect(sawParked, "the failing endpoint was shown as parked")
                try await receiver.waitForAccepted(5)

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
                let expected = try await stack.requestEventIDs(clientIDs: [Self.notes])
                #expect(accepted == expected)

                // The cursor moves just after the receiver has answered: wait for it.
                let state = try await eventuallyValue("the cursor past the five events") {
                    try await deliveries.states().first.flatMap { $0.delivered >= 5 ? $0 : nil }
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

                // The documented shell check of a signature agrees with the one sent.
                let sample = try #require(received.last)
                #expect(try Self.documentedSignature(of: sample, secretFile: receiver.secretFile) == sample.signature)
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
                    try await eventually("the slow endpoint answers") { !slow.exchanges.isEmpty }

                    try await stack.enqueue(clientID: photos, reference: "fast-0", kind: .refreshToken)
                    try await eventually("the other app's request is revoked") {
                        try await stack.requests().contains { $0.externalReference == "fast-0" && $0.state.isFinal }
                    }
                    // Its event is readable once every transaction before it has ended (busy when other tests run).
                    let expected = try await eventuallyValue("the other app's event is in the feed") {
                        let ids = try await stack.requestEventIDs(clientIDs: [photos])
                        return ids.isEmpty ? nil : ids
                    }
                    try await healthy.waitForAccepted(expected.count)
                    let lastHealthy = try #require(healthy.requestDeliveries.last)
                    let first = try #require(slow.exchanges.first)
                    #expect(
                        first.closedAt.map { lastHealthy.receivedAt < $0 } ?? true,
                        "the healthy endpoint had its events while the slow one was still trickling"
                    )
                    #expect(healthy.deliveries.allSatisfy { $0.clientID == photos && $0.signatureValid })

                    // The slow exchange is cut before its body is whole, and the same event is sent again.
                    try await eventually("the slow delivery is retried") { slow.exchanges.count >= 2 }
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

    /// docs/integration.md's shell blocks about webhooks: the `sign-webhook` script and the curl example.
    static func documentedWebhookBlocks() throws -> (sign: String, curl: String) {
        let blocks = Documentation.shellBlocks(in: try Documentation.read("docs/integration.md"))
        return (
            try #require(blocks.first { $0.hasPrefix("# sign-webhook") }),
            try #require(blocks.first { $0.contains("curl") && $0.contains("sign-webhook") })
        )
    }

    /// Runs `script` with sh in a directory holding the documented files: `sign-webhook`, the
    /// endpoint's secret as `notes-webhook-secret`, and `body` as `body.json`. Returns its output.
    static func runDocumentedShell(_ script: String, body: String, secretFile: String, environment: [String: String] = [:]) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-docs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(try documentedWebhookBlocks().sign.utf8).write(to: directory.appendingPathComponent("sign-webhook"))
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

    /// The documented `sign-webhook` over a delivery, as printed.
    static func documentedSignature(of delivery: WebhookReceiver.Delivery, secretFile: String) throws -> String {
        try runDocumentedShell(
            #"sh sign-webhook notes-webhook-secret "$id" "$ts" body.json"#,
            body: delivery.body,
            secretFile: secretFile,
            environment: ["id": delivery.id, "ts": String(delivery.timestamp)]
        )
    }

    @Test func theDocumentedCurlExamplePostsAnEventThatVerifies() async throws {
        try await WebhookReceiver.with { receiver in
            let sample = #"{"id":"5b0c2d1e-0000-4000-8000-000000000001","type":"revocation.succeeded","client_id":"com.example.notes"}"#
            let curl = try Self.documentedWebhookBlocks().curl.replacingOccurrences(of: "https://notes.example.com/hooks/revoker", with: receiver.url)
            _ = try Self.runDocumentedShell(curl, body: sample, secretFile: receiver.secretFile)
            let delivery = try #require(receiver.deliveries.first)
            #expect(delivery.signatureValid, "the documented curl example signs as Revoker does")
            #expect(delivery.body == sample && delivery.id.hasPrefix("msg_test_") && delivery.answered == 204)
        }
    }

}
