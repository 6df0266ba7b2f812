import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Fenced changes")
struct FencedChangeTests {
    @Test func staleFenceChangesNothingAndExpiredLeaseIsRescued() async throws {
        try await Fixtures.withQueue { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-1"), actor: "test")
            let first = try #require(try await queue.claim(batch: 1, lease: .milliseconds(1), owner: "w1").first)
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await queue.rescue().rescued == 1)
            let second = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w2").first)
            #expect(second.lease.fencingToken == first.lease.fencingToken + 1)
            #expect(try await queue.finish(first.lease, state: .succeeded, outcome: .revoked) == false)
            #expect(try await queue.record(first.lease, events: [AuditEvent(.note, detail: "late")]) == false)
            let request = try #require(try await queue.request(id: first.request.id))
            #expect(request.state == .running)
            #expect(request.leaseOwner == "w2")
            #expect(request.hasCredential)
            let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: request.id))
            #expect(audit.records.map(\.event) == ["enqueued", "claimed", "rescued", "claimed"])
            #expect(try await queue.finish(second.lease, state: .succeeded, outcome: .revoked) == true)
        }
    }

    @Test func concurrentFinishesEachApplyOnceWithTheirEventsInOrder() async throws {
        try await Fixtures.withQueue { db, queue in
            let claimed = try await Fixtures.enqueueAndClaim(200, db: db, queue: queue)
            #expect(claimed.count == 200)
            let first = claimed[0].lease
            let stale = Lease(requestID: first.requestID, fencingToken: first.fencingToken - 1, owner: "w", expiresAt: first.expiresAt)
            #expect(try await queue.extendLeases(claimed.map(\.lease) + [stale], by: .seconds(120)) == 200, "every current lease, not the stale one")
            // Concurrent finishes share statements; each must still apply to its own row only, and a stale one to none.
            let applied = try await withThrowingTaskGroup(of: (UUID?, Bool).self) { group in
                group.addTask { (nil, try await queue.finish(stale, state: .succeeded, outcome: .revoked)) }
                for (index, item) in claimed.enumerated() {
                    group.addTask {
                        let outcome: RevocationOutcome = index % 2 == 0 ? .revoked : .alreadyInvalid
                        let events = [AuditEvent(.note, detail: "step \(index)")]
                        return (item.request.id, try await queue.finish(item.lease, state: .succeeded, outcome: outcome, events: events))
                    }
                }
                var applied: [(UUID?, Bool)] = []
                for try await result in group { applied.append(result) }
                return applied
            }
            #expect(applied.filter { $0.0 == nil }.map(\.1) == [false])
            #expect(applied.filter { $0.0 != nil && $0.1 }.count == 200)
            let rows = try await db.client.query(
                """
                SELECT count(*) FILTER (WHERE outcome = 'revoked')::int, count(*) FILTER (WHERE outcome = 'already_invalid')::int
                FROM revoker.revocation_requests WHERE state = 'succeeded' AND sealed_credential IS NULL AND lease_owner IS NULL
                """
            ).collect()
            let outcomes = try rows.first?.decode((Int, Int).self)
            #expect(outcomes?.0 == 100 && outcomes?.1 == 100)
            for index in [0, 1, 199] {
                let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: claimed[index].request.id))
                #expect(audit.records.suffix(3).map(\.event) == ["note", "succeeded", "credential_erased"])
                #expect(audit.records.suffix(3).first?.detail == "step \(index)")
                #expect(audit.records.suffix(3).allSatisfy { $0.actor == "w" && $0.attempt == 1 })
            }
        }
    }

    @Test func leaseExtensionsAndFinishesOverTheSameRowsNeverDeadlock() async throws {
        try await Fixtures.withQueue { db, queue in
            let claimed = try await Fixtures.enqueueAndClaim(300, db: db, queue: queue)
            #expect(claimed.count == 300)
            // A worker extends all its leases while its requests finish in another order: both lock
            // many of the same rows, so they must lock them in one order (PostgreSQL would abort one
            // of them as a deadlock otherwise).
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<15 { _ = try await queue.extendLeases(claimed.map(\.lease).shuffled(), by: .seconds(120)) }
                    }
                }
                for item in claimed.shuffled() {
                    group.addTask { _ = try await queue.finish(item.lease, state: .succeeded, outcome: .revoked) }
                }
                try await group.waitForAll()
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests WHERE state = 'succeeded'").collect()
            #expect(try rows.first?.decode(Int.self) == 300)
        }
    }

    @Test func finishErasesCredentialAndNeverLeaksIt() async throws {
        let storage = CapturingLogHandler.Storage()
        let logger = CapturingLogHandler.logger(storage: storage)
        let secret = "r.SUPER-SECRET-\(UUID().uuidString)"
        let code = "c.CODE-SECRET-\(UUID().uuidString)"
        try await Fixtures.withQueue(logger: logger) { db, queue in
            _ = try await queue.enqueue(Fixtures.new("user-9", secret: code, kind: .authorizationCode), actor: "test")
            let claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w").first)
            #expect(claimed.credential.secret == code)
            #expect(!"\(claimed)".contains(code))
            #expect(!String(reflecting: claimed.credential).contains(code))
            #expect(
                try await queue.replaceCredential(
                    claimed.lease,
                    with: Credential(kind: .refreshToken, secret: secret),
                    events: [AuditEvent(.tokenExchanged, providerEndpoint: "/auth/token", httpStatus: 200, latency: .milliseconds(12))]
                )
            )
            #expect(
                try await queue.finish(
                    claimed.lease,
                    state: .succeeded,
                    outcome: .revoked,
                    events: [AuditEvent(.revoked, providerEndpoint: "/auth/revoke", httpStatus: 200)]
                )
            )
            let rows = try await db.client.query(
                "SELECT sealed_credential IS NULL AND credential_key_id IS NULL FROM revoker.revocation_requests"
            ).collect()
            #expect(try rows.first?.decode(Bool.self) == true)
            let hits = try await db.client.query(
                """
                SELECT count(*)::int FROM revoker.audit_events a
                WHERE strpos(a::text, \(secret)) > 0 OR strpos(a::text, \(code)) > 0
                """
            ).collect()
            #expect(try hits.first?.decode(Int.self) == 0)
            let events = try await AuditLog(client: db.client, logger: logger).query(AuditQuery(externalReference: "user-9"))
            #expect(events.records.map(\.event) == ["enqueued", "claimed", "token_exchanged", "revoked", "succeeded", "credential_erased"])
        }
        #expect(!storage.all.isEmpty)
        #expect(!storage.all.contains { $0.contains(secret) || $0.contains(code) })
    }
}
