import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Webhook delivery by the `revoker` binary: a drain that ends, `prune`, and a worker killed
/// mid-delivery (delivery itself is `RevokerWebhooksTests`' concern).
@Suite("Webhook delivery by revoker drain, work and prune")
struct WebhookCommandTests {
    static let notes = "com.example.notes"

    static func settings(_ receiver: WebhookReceiver) -> [String: any Sendable] {
        receiver.settings(name: "notes-backend", clientIDs: [notes])
    }

    static func expectedIDs(_ stack: RevokerTestStack) async throws -> [String] {
        try await stack.requestEventIDs(clientIDs: [notes])
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
                #expect(receiver.requestDeliveries.filter { (200..<300).contains($0.answered) }.map(\.id) == expected)

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
            // A delivery that fails waits 600 s, so the slowest receiver on a loaded machine must not fail one.
            settings["webhook_delivery"] =
                ["poll_interval_seconds": 0.2, "retry_base_seconds": 600, "from_start": true, "timeout_seconds": 60, "lease_seconds": 120]
                as [String: any Sendable]
            try await RevokerTestStack.with(settings: settings) { stack in
                for index in 0..<3 {
                    try await stack.enqueue(clientID: Self.notes, reference: "old-\(index)", kind: .refreshToken)
                }
                let delivered = try await RevokerProcess.run(["drain"], environment: stack.environment, timeout: .seconds(300))
                #expect(delivered.status == 0, "\(delivered.stderr.suffix(1000))")
                let received = receiver.requestDeliveries.filter { (200..<300).contains($0.answered) }.count
                #expect(
                    received == 3,
                    "the drain delivered its three events: \(receiver.deliveries.map(\.answered)) \(delivered.stderr.suffix(2000))"
                )
                // A fourth event the endpoint refuses stays behind its cursor.
                receiver.plan { _ in .status(503) }
                try await stack.enqueue(clientID: Self.notes, reference: "old-3", kind: .refreshToken)
                let refused = try await RevokerProcess.run(["drain"], environment: stack.environment, timeout: .seconds(300))
                #expect(refused.status == 0, "\(refused.stderr.suffix(1000))")
                // Readable once every transaction before them has ended (busy when other tests run).
                var all: [String] = []
                try await eventually("the four events in the feed") {
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
                    try await eventually("three deliveries") { receiver.requestDeliveries.count >= 3 }
                    // Time for the fourth, slow one to be sent: the receiver records it only once it answers.
                    try await Task.sleep(for: .milliseconds(500))
                    first.signal(SIGKILL)
                    _ = try? await first.wait(timeout: .seconds(10))

                    // Another worker takes over once the endpoint's lease expires, and lives through a
                    // database restart while it delivers.
                    let second = try RevokerProcess(["work", "--log-level", "info"], environment: stack.environment)
                    try await eventually("six deliveries") { receiver.requestDeliveries.count >= 6 }
                    try server.stop()
                    try await Task.sleep(for: .seconds(1))
                    try server.start()
                    for index in 0..<4 {
                        // The test's own pool reconnects after the restart; its first calls may fail.
                        var failure: (any Error)?
                        try await eventually("b-\(index) enqueued (last failure: \(failure.map { "\($0)" } ?? "none"))", every: .milliseconds(500)) {
                            do {
                                try await stack.enqueue(clientID: Self.notes, reference: "b-\(index)", kind: .refreshToken)
                                return true
                            } catch {
                                failure = error
                                return false
                            }
                        }
                    }
                    try await receiver.waitForAccepted(12)
                    second.signal(SIGTERM)
                    let ended = try await second.wait(timeout: .seconds(60))
                    #expect(ended.status == 0, "\(ended.stderr.suffix(1000))")

                    let expected = try await Self.expectedIDs(stack)
                    #expect(expected.count == 12)
                    let deliveries = receiver.deliveries
                    #expect(deliveries.allSatisfy { $0.signatureValid })
                    // Every event arrived, first arrivals in feed order.
                    var firstArrivals: [String] = []
                    for delivery in receiver.requestDeliveries where !firstArrivals.contains(delivery.id) { firstArrivals.append(delivery.id) }
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
