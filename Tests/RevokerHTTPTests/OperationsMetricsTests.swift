import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// The gauges the alert rules (`deploy/prometheus/alerts.yaml`) read, each moved by the database
/// state it reports and read back from `/metrics`: live workers, paused apps, final outcomes,
/// webhook lag, how long the audit trail has gone unsigned.
@Suite("Metrics for the alerts")
struct OperationsMetricsTests {
    static let notes = "com.example.notes"

    @Test func gaugesForTheAlertsFollowTheDatabase() async throws {
        try await WebhookReceiver.with { receiver in
            let key = "rvk_test_" + UUID().uuidString
            let digest = SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
            let http: [String: any Sendable] = [
                "port": 0, "api_keys": [["name": "ops", "sha256": digest, "scopes": ["admin"]] as [String: any Sendable]],
            ]
            // No worker and no deliverer in the process: the test alone moves what the gauges read.
            try await RevokerTestStack.with(http: http, settings: receiver.settings(name: "notes-backend", clientIDs: [Self.notes]), serving: .api) {
                stack in
                let client = stack.database.client
                let notesPaused = #"revoker_app_paused{client_id="com.example.notes"}"#
                let photosPaused = #"revoker_app_paused{client_id="com.example.photos"}"#
                let exhausted = #"revoker_requests_by_outcome{outcome="exhausted"}"#
                let lag = #"revoker_webhook_lag_seconds{endpoint="notes-backend"}"#

                _ = try await Self.scrape(stack, until: "no worker, no app paused, nothing exhausted, the inbox's counter at zero") {
                    $0["revoker_workers_live"] == 0 && $0[notesPaused] == 0 && $0[photosPaused] == 0 && $0[exhausted] == 0
                        && $0[#"revoker_apple_notifications_total{result="accepted"}"#] == 0
                }

                // A worker lives while it holds its liveness lock; a row left by one that died does not count.
                try await client.query("INSERT INTO revoker.workers (owner) VALUES ('died-without-a-clean-stop')").collect()
                try await stack.queue.withWorkerSession(owner: "metrics-test-worker", registered: {}) { _ in
                    _ = try await Self.scrape(stack, until: "one live worker, the one holding its lock") { $0["revoker_workers_live"] == 1 }
                }
                _ = try await Self.scrape(stack, until: "no live worker once its session ended") { $0["revoker_workers_live"] == 0 }

                // A paused app is named; the others are not.
                try await stack.queue.pauseApp(clientID: Self.notes, reason: ErrorDetail(code: "invalid_client"), probeAfter: .seconds(300))
                _ = try await Self.scrape(stack, until: "notes paused, photos not") {
                    $0[notesPaused] == 1 && $0[photosPaused] == 0 && $0["revoker_paused_apps"] == 1
                }
                #expect(try await stack.queue.resumeApp(clientID: Self.notes))
                _ = try await Self.scrape(stack, until: "notes resumed") { $0[notesPaused] == 0 }

                // The endpoint has had everything so far; a request that ends `exhausted` is counted,
                // and its event puts the endpoint behind.
                let deliveries = WebhookDeliveries(client: client, logger: stack.logger)
                try await deliveries.register(["notes-backend"], fromStart: false)
                _ = try await Self.scrape(stack, until: "the endpoint registered and not behind") { $0[lag] == 0 }
                try await stack.enqueue(clientID: Self.notes, reference: "acct-exhausted", kind: .refreshToken)
                let claimed = try #require(try await stack.queue.claim(batch: 1, lease: .seconds(60), owner: "metrics-test").first)
                #expect(try await stack.queue.finish(claimed.lease, state: .failed, outcome: .exhausted))
                // Rows written and no checkpoint yet: the trail is unsigned too.
                _ = try await Self.scrape(stack, until: "one exhausted request, its event waiting, the trail unsigned") {
                    $0[exhausted] == 1 && $0[#"revoker_requests_by_outcome{outcome="revoked"}"#] == 0 && ($0[lag] ?? 0) > 0
                        && ($0["revoker_audit_unsigned_age_seconds"] ?? 0) > 0 && $0["revoker_audit_last_checkpoint_age_seconds"] == nil
                }

                // A checkpoint covers every row; a row written after it waits for the next one.
                let signer = try #require(try stack.configuration.audit.signer())
                #expect(try await AuditCheckpoints(client: client, logger: stack.logger).take(signer: signer) != nil)
                _ = try await Self.scrape(stack, until: "every row covered by the checkpoint") {
                    $0["revoker_audit_unsigned_age_seconds"] == 0 && ($0["revoker_audit_last_checkpoint_age_seconds"] ?? -1) >= 0
                }
                try await stack.enqueue(clientID: Self.notes, reference: "acct-after", kind: .refreshToken)
                _ = try await Self.scrape(stack, until: "the new row unsigned") { ($0["revoker_audit_unsigned_age_seconds"] ?? 0) > 0 }

                // Once the endpoint has the newest of its events (the checkpoint's too), it is not behind.
                let newest = try #require(
                    try await client.query(
                        """
                        SELECT txid::text, position FROM revoker.outbox_events
                        WHERE client_id = \(Self.notes) ORDER BY txid DESC, position DESC LIMIT 1
                        """
                    ).collect().first?.decode((String, Int64).self)
                )
                let cursor = EventCursor(transaction: try #require(UInt64(newest.0)), position: newest.1)
                let lease = try #require(try await deliveries.lease("notes-backend", owner: "metrics-test", duration: .seconds(60)))
                #expect(try await deliveries.delivered(lease, through: cursor, status: 204, extend: .seconds(1)))
                _ = try await Self.scrape(stack, until: "the endpoint not behind") { $0[lag] == 0 }

                // Database calls of API requests are timed.
                _ = try await Self.get(stack, "/v1/events/deliveries", key: key)
                _ = try await Self.scrape(stack, until: "the API's database calls counted") {
                    ($0[#"revoker_database_call_duration_seconds_count{caller="api",result="ok"}"#] ?? 0) >= 1
                }
            }
        }
    }

    /// Scrapes until `holds` is true of the metrics, and returns them: a scrape on a loaded
    /// machine may leave a gauge unread (it keeps its last value), so one scrape proves nothing.
    static func scrape(_ stack: RevokerTestStack, until what: String, _ holds: (Exposition) -> Bool) async throws -> Exposition {
        var last = Exposition("")
        return try await eventuallyValue(
            "\(what); last scrape: \(last.values.filter { $0.key.hasPrefix("revoker_") && !$0.key.contains("duration") })",
            every: .milliseconds(100)
        ) {
            last = try await scrape(stack)
            return holds(last) ? last : nil
        }
    }

    static func scrape(_ stack: RevokerTestStack) async throws -> Exposition {
        Exposition(try await get(stack, "/metrics"))
    }

    static func get(_ stack: RevokerTestStack, _ path: String, key: String? = nil) async throws -> String {
        var request = HTTPClientRequest(url: (stack.apiBaseURL ?? "") + path)
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        #expect(response.status == .ok, "\(path)")
        return String(buffer: try await response.body.collect(upTo: 4 * 1024 * 1024))
    }
}

/// A Prometheus text exposition, by series (`name{labels}` as exported) to value.
struct Exposition: Sendable {
    let values: [String: Double]

    init(_ text: String) {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        self.values = values
    }

    subscript(_ series: String) -> Double? { values[series] }
}
