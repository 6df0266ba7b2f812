import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import RevokerApp
import RevokerEvidence
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// A serving process's checkpoints: published, witnessed, refused loudly over a rewritten
/// history; and the verification endpoint, one at a time.
@Suite("HTTP API: audit witnesses")
struct AuditWitnessAPITests {
    static func get(_ stack: RevokerTestStack, _ path: String, key: String? = nil) async throws -> (status: Int, text: String) {
        var request = HTTPClientRequest(url: (stack.apiBaseURL ?? "") + path)
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 24)
        return (Int(response.status.code), String(buffer: body))
    }

    @Test func aServingProcessRefusesToSignARewrittenHistoryAndSaysSoEverywhere() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-witness-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let witness = directory.appendingPathComponent("checkpoints.jsonl").path
        let audit: [String: any Sendable] = ["checkpoint_interval_seconds": 1, "witness_path": witness]
        try await RevokerTestStack.with(
            settings: ["audit": audit],
            serving: .api
        ) { stack in
            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "user-", count: 2)
            try await eventually("a checkpoint in the witness") {
                let held = (try? AuditWitness.read(witness)) ?? []
                let covered = try await AuditVerifier(client: stack.database.client, logger: stack.logger)
                    .verify(keys: stack.configuration.audit.verificationKeys)
                return !held.isEmpty && covered.rowsNotYetCheckpointed == 0
            }
            #expect(try await Self.get(stack, "/readyz").text.contains("\"audit\"") == false)

            // The owner removes every checkpoint and rewrites a request's rows under them.
            let chain = try #require(
                try await stack.database.client.query("SELECT request_id::text FROM revoker.audit_events WHERE request_id IS NOT NULL LIMIT 1")
                    .collect().first?.decode(String.self)
            )
            try await stack.database.client.withTransaction(logger: stack.logger) { connection in
                for sql in [
                    "SET LOCAL session_replication_role = replica",
                    "DELETE FROM revoker.audit_checkpoints",
                    "UPDATE revoker.audit_events SET actor = 'someone-else' WHERE chain_key = '\(chain)'",
                    "UPDATE revoker.audit_events e SET hash = revoker.audit_row_hash(e.prev_hash, e) WHERE chain_key = '\(chain)'",
                ] {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: stack.logger).collect()
                }
            }
            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "after-", count: 1)

            try await eventually("/readyz naming the refusal") { try await Self.get(stack, "/readyz").text.contains("checkpoint_missing") }
            let ready = try await Self.get(stack, "/readyz")
            #expect(ready.status == 200, "the API still serves: \(ready.text)")
            #expect(try await Self.get(stack, "/metrics").text.contains("revoker_audit_checkpoint_refused 1"))
            #expect(stack.logs.all.contains { $0.hasPrefix("error Refusing to sign an audit checkpoint") })
            try await eventually("the refusal as an event") {
                try await EventFeed(client: stack.database.client, logger: stack.logger).events(after: nil, limit: 1000)
                    .contains { $0.type == "audit.checkpoint_refused" && $0.errorCode == "checkpoint_missing" }
            }
            // Nothing was signed over the rewritten trail.
            let stored = try await stack.database.client.query("SELECT count(*)::int FROM revoker.audit_checkpoints").collect()
            #expect(try stored.first?.decode(Int.self) == 0)
        }
    }

    @Test func oneVerificationRunsAtATimeAndTheSameQuestionSharesItsAnswer() async throws {
        let auditor = "rvk_test_" + UUID().uuidString
        let keys: [[String: any Sendable]] = [["name": "auditor", "sha256": APIHarness.Keys.hash(auditor), "scopes": ["audit:read"]]]
        try await RevokerTestStack.with(
            http: ["port": 0, "api_keys": keys],
            serving: .api
        ) { stack in
            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "user-", count: 2)
            let (locked, lockedContinuation) = AsyncStream.makeStream(of: Void.self)
            let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: (String, Int).self) { group in
                // The trail locked, so that the first verification waits inside the gate.
                group.addTask {
                    try await stack.database.client.withTransaction(logger: stack.logger) { connection in
                        _ = try await connection.query("LOCK TABLE revoker.audit_events IN ACCESS EXCLUSIVE MODE", logger: stack.logger).collect()
                        lockedContinuation.yield()
                        for await _ in release { break }
                    }
                    return ("lock", 0)
                }
                for await _ in locked { break }
                group.addTask { ("first", try await Self.get(stack, "/v1/audit/verify", key: auditor).status) }
                try await eventually("the first verification waiting on the lock") {
                    let rows = try await stack.database.client.query(
                        "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%revoker.audit%'"
                    ).collect()
                    return try (rows.first?.decode(Int.self) ?? 0) > 0
                }
                group.addTask { ("same", try await Self.get(stack, "/v1/audit/verify", key: auditor).status) }
                let other = try await Self.get(stack, "/v1/audit/verify?client_id=com.example.notes", key: auditor)
                #expect(other.status == 429, "\(other.text)")
                releaseContinuation.yield()
                releaseContinuation.finish()
                var statuses: [String: Int] = [:]
                for try await (name, status) in group { statuses[name] = status }
                #expect(statuses["first"] == 200)
                #expect(statuses["same"] == 200)
            }
            #expect(try await Self.get(stack, "/v1/audit/verify?client_id=com.example.notes", key: auditor).status == 200)
        }
    }
}
