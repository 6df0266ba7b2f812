import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// What a process acknowledged is kept, and after a failover what the database no longer holds
/// is found and recorded: each kind of write, found when gone and left alone when there.
@Suite("Writes a failover lost")
struct LostWritesTests {
    static let logger = Logger(label: "test")
    static let app = "com.example.app"

    @Test func everyAcknowledgedWriteIsKeptAndOnlyTheMissingOnesAreFound() async throws {
        try await Fixtures.withQueue { db, queue in
            let claimed = try #require(try await Fixtures.enqueueAndClaim(1, db: db, queue: queue).first)
            #expect(try await queue.finish(claimed.lease, state: .succeeded, outcome: .revoked))
            let pending = try await queue.enqueue(Fixtures.new("acked-1"), actor: "t").request
            let cancelled = try await queue.enqueue(Fixtures.new("acked-2", secret: "r.two"), actor: "t").request
            _ = try await queue.cancel(id: cancelled.id, actor: "t")
            let grant = try await queue.custody.register(
                NewGrant(clientID: Self.app, accountReference: "acct-1", credential: Credential(kind: .refreshToken, secret: "r.three")),
                actor: "t"
            ).grant
            let deletion = try await queue.deletions.request(accountReference: "acct-2", clientIDs: [Self.app], actor: "t").deletion
            let messages = ProviderMessages(client: db.client, logger: Self.logger, acknowledged: queue.acknowledged)
            let source = ProviderMessageSource(provider: try #require(ProviderName(rawValue: "example")), actor: "example:push", sender: "Example")
            let message = ProviderMessage(
                id: "m-1",
                clientID: Self.app,
                type: "user-gone",
                userID: "u-1",
                endsGrants: false,
                eventType: "example.user_gone",
                issuedAt: Date(),
                issuer: "https://example.com",
                keyID: "k1",
                details: []
            )
            #expect(try await messages.receive(message, from: source) == .accepted(endedRequests: 0))
            #expect(try await messages.receive(message, from: source) == .duplicate)

            let kept = queue.acknowledged.kept()
            #expect(kept.overflowed == 0)
            #expect(kept.writes.map(\.kind) == [.end, .request, .request, .end, .grant, .deletion, .message], "a repeat acknowledges nothing new")
            #expect(
                kept.writes.map(\.id) == [claimed.request.id, pending.id, cancelled.id, cancelled.id, grant.id, deletion.id].map {
                    $0.uuidString.lowercased()
                } + ["m-1"]
            )
            #expect(try await queue.missing(kept.writes).isEmpty, "every write is there")

            // As a promoted standby would lack them: rows it never received, a request's end it
            // never received (still pending), and an end redone after the failover (stamped
            // later than the end acknowledged).
            let hour = Date().addingTimeInterval(-3600)
            let gone = [
                AcknowledgedWrite(.request, id: UUID(), clientID: Self.app, reference: "ref-gone"),
                AcknowledgedWrite(.grant, id: UUID(), clientID: Self.app, reference: "acct-gone"),
                AcknowledgedWrite(.deletion, id: UUID(), clientID: Self.app, reference: "acct-gone"),
                AcknowledgedWrite(.message, id: "m-gone", clientID: Self.app, provider: "example"),
                AcknowledgedWrite(.message, id: "m-1", clientID: Self.app, provider: "other"),
                AcknowledgedWrite(.end, id: pending.id, clientID: Self.app),
                AcknowledgedWrite(.end, id: cancelled.id, clientID: Self.app, at: hour),
            ]
            #expect(try await queue.missing(kept.writes + gone) == gone)

            try await queue.recordLost(gone, timelines: (from: 1, to: 2), actor: "revoker")
            let audit = try await AuditLog(client: db.client, logger: Self.logger).query(AuditQuery(events: [.writeLost]))
            #expect(audit.records.count == gone.count)
            #expect(audit.records.allSatisfy { $0.clientID == Self.app && $0.actor == "revoker" })
            #expect(audit.records.first?.detail?.hasSuffix("missing after the database's timeline went from 1 to 2") == true)
            #expect(audit.records.contains { $0.detail?.hasPrefix("message example m-gone acknowledged at ") == true })
            #expect(try await queue.statistics().writesLost == gone.count)

            let events = try await eventuallyValue("the losses in the event feed") {
                let events = try await EventFeed(client: db.client, logger: Self.logger).events(after: nil, limit: 1000)
                    .filter { $0.type == "database.write_lost" }
                return events.count == gone.count ? events : nil
            }
            #expect(events.map(\.errorCode) == ["request", "grant", "deletion", "message", "message", "end", "end"])
            #expect(events[0].requestID == UUID(uuidString: gone[0].id) && events[0].externalReference == "ref-gone")
            #expect(events[1].grantID == UUID(uuidString: gone[1].id) && events[1].externalReference == "acct-gone")
            #expect(events[2].deletion?.contains(gone[2].id) == true && events[2].externalReference == nil)
            #expect(events[3].notificationID == "m-gone" && events[3].provider == "example")
            #expect(events[6].requestID == cancelled.id)
        }
    }

    @Test func theKeptWritesAreBoundedByCountAndAgeAndForgetWhatWasRecorded() {
        let writes = AcknowledgedWrites(capacity: 3)
        let now = Date()
        writes.record(.init(.request, id: UUID(), clientID: Self.app, at: now.addingTimeInterval(-AcknowledgedWrites.retention - 1)))
        #expect(writes.kept(now: now).writes.isEmpty, "older than the retention")
        let ids = (0..<5).map { _ in UUID() }
        for id in ids { writes.record(.init(.request, id: id, clientID: Self.app, at: now)) }
        let kept = writes.kept(now: now)
        #expect(kept.writes.map(\.id) == ids.suffix(3).map { $0.uuidString.lowercased() })
        #expect(kept.overflowed == 2, "pushed out young: counted as not checkable")
        writes.forget([kept.writes[1]])
        #expect(writes.kept(now: now).writes.map(\.id) == [ids[2], ids[4]].map { $0.uuidString.lowercased() })
    }
}
