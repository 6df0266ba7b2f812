import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Requests found in the audit trail")
struct AuditRequestsTests {
    static let logger = Logger(label: "test")

    @Test func searchPagesNewestFirstAndOutlivesThePrunedQueue() async throws {
        try await Fixtures.withQueue { db, queue in
            var enqueued: [UUID] = []
            for index in 0..<5 {
                enqueued.append(try await queue.enqueue(Fixtures.new("paged-\(index)"), actor: "t").request.id)
            }
            _ = try await queue.cancel(id: enqueued[1], actor: "ops")
            let requests = AuditRequests(client: db.client, logger: Self.logger)
            var search = AuditRequestSearch(limit: 2)
            var seen: [UUID] = []
            var pages = 0
            repeat {
                let page = try await requests.search(search)
                seen += page.requests.map(\.requestID)
                search.cursor = page.nextCursor
                pages += 1
            } while search.cursor != nil && pages < 10
            #expect(pages == 3)
            #expect(seen == enqueued.reversed())

            let cancelled = try await requests.search(AuditRequestSearch(outcome: "cancelled"))
            #expect(cancelled.requests.map(\.requestID) == [enqueued[1]])
            #expect(cancelled.requests.first?.requestedBy == "t" && cancelled.requests.first?.finishedAt != nil)
            let open = try await requests.search(AuditRequestSearch(outcome: AuditRequestSearch.inProgress))
            #expect(Set(open.requests.map(\.requestID)) == Set(enqueued).subtracting([enqueued[1]]))

            // Gone from the queue, still found through its audit rows.
            _ = try await db.client.query("DELETE FROM revoker.revocation_requests WHERE id = \(enqueued[1])").collect()
            let found = try await requests.search(AuditRequestSearch(externalReference: cancelled.requests.first?.externalReference))
            #expect(found.requests.map(\.requestID) == [enqueued[1]] && found.requests.first?.outcome == "cancelled")

            await #expect(throws: RevokerStoreError.self) { try await requests.search(AuditRequestSearch(cursor: "v1.x.1")) }
            let failures = try await requests.failures(since: Date().addingTimeInterval(-3600))
            #expect(failures.isEmpty)
        }
    }
}
