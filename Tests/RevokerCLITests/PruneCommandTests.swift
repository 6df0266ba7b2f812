import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("revoker prune")
struct PruneCommandTests {
    @Test("prune deletes only final requests older than the period and keeps every audit row")
    func prunesOldFinalRequestsOnly() async throws {
        try await CLIFixture.with { fixture in
            let tokens = (0..<3).map { _ in randomToken() }
            let old = try await StatusAuditCommandTests.enqueue(fixture, reference: "old", token: tokens[0])
            let recent = try await StatusAuditCommandTests.enqueue(fixture, reference: "recent", token: tokens[1])
            let pending = try await StatusAuditCommandTests.enqueue(fixture, reference: "pending", token: tokens[2])
            _ = try await fixture.queue().cancel(id: old, actor: "test")
            _ = try await fixture.queue().cancel(id: recent, actor: "test")
            _ = try await fixture.database.client.query(
                "UPDATE revoker.revocation_requests SET finished_at = now() - interval '100 days', created_at = now() - interval '101 days' WHERE id = \(old)",
                logger: CLIFixture.logger
            ).collect()
            let auditBefore = try await Self.auditCount(fixture)

            let result = try await fixture.run(["prune", "--older-than-days", "90", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let object = try #require(try parseJSON(result.stdout) as? [String: Any])
            #expect(object["pruned"] as? Int == 1)
            let remaining = try await fixture.database.client.query("SELECT id FROM revoker.revocation_requests", logger: CLIFixture.logger)
                .collect().map { try $0.decode(UUID.self) }
            #expect(Set(remaining) == [recent, pending], "only the old final request is gone")
            #expect(try await Self.auditCount(fixture) == auditBefore, "the audit trail is untouched")

            let again = try await fixture.run(["prune", "--older-than-days", "90"])
            #expect(again.status == 0 && again.stdout.hasPrefix("Pruned 0 final requests"), "\(again.stdout)\(again.stderr)")
            expectNothingLeaked(result, tokens)
        }
    }

    @Test("prune refuses a period out of range and stores nothing", arguments: [["--older-than-days", "0"], ["--older-than-days", "x"], []])
    func refusesBadPeriods(_ arguments: [String]) async throws {
        try await CLIFixture.with { fixture in
            let result = try await fixture.run(["prune"] + arguments)
            #expect(result.status != 0)
            #expect(result.stderr.contains("older-than-days"), "\(result.stderr)")
        }
    }

    static func auditCount(_ fixture: CLIFixture) async throws -> Int {
        let rows = try await fixture.database.client.query("SELECT count(*)::int FROM revoker.audit_events", logger: CLIFixture.logger).collect()
        return try rows.first?.decode(Int.self) ?? -1
    }
}
