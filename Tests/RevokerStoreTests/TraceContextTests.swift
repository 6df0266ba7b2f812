import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import Testing

/// The W3C trace context kept with what is enqueued (migration 0021): written by the app, taken
/// from the transaction on the SQL path, inherited by the requests a deletion or a grant makes.
@Suite("trace context across the queue")
struct TraceContextTests {
    static let logger = Logger(label: "test")
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    static let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"

    @Test func theSQLPathTakesTheTransactionsTraceParentAndIgnoresAMalformedOne() async throws {
        try await Fixtures.withQueue { db, queue in
            let cases: [(String, String?)] = [
                ("traced", Self.parent), ("uppercase", Self.parent.uppercased()),
                ("zeros", "00-\(String(repeating: "0", count: 32))-00f067aa0ba902b7-01"),
                ("garbage", "not a traceparent"), ("none", nil),
            ]
            for (reference, value) in cases {
                try await db.client.withTransaction(logger: Self.logger) { connection in
                    if let value {
                        _ = try await connection.query("SELECT set_config('revoker.trace_parent', \(value), true)", logger: Self.logger).collect()
                    }
                    _ = try await connection.query(
                        "SELECT revoker.enqueue_revocation('com.example.app', \(reference), 'refresh_token', \("r." + reference))",
                        logger: Self.logger
                    ).collect()
                }
            }
            let requests = try await queue.list(RevocationFilter(limit: 10))
            let byReference = Dictionary(uniqueKeysWithValues: requests.map { ($0.externalReference, $0.traceParent?.rawValue) })
            #expect(byReference["traced"] == .some(Self.parent))
            for reference in ["uppercase", "zeros", "garbage", "none"] {
                #expect(byReference[reference] == .some(nil), "\(reference) keeps no trace parent")
            }
            // Transaction-local: a later transaction without it keeps none.
            _ = try await db.client.query(
                "SELECT revoker.enqueue_revocation('com.example.app', 'after', 'refresh_token', 'r.after')",
                logger: Self.logger
            ).collect()
            #expect(try await queue.list(RevocationFilter(externalReference: "after")).first?.traceParent == nil)
        }
    }

    @Test func aDeletionsRequestsAndAGrantsHoldRequestContinueTheirTrace() async throws {
        try await Fixtures.withQueue { _, queue in
            let registration = try await queue.custody.register(
                try NewGrant(
                    clientID: "com.example.app",
                    accountReference: "acct",
                    credential: Credential(kind: .authorizationCode, secret: "c.acct")
                ),
                actor: "test",
                traceParent: TraceParent(Self.parent)
            )
            let holdID = try #require(registration.grant.holdRequestID)
            let hold = try #require(try await queue.request(id: holdID))
            #expect(hold.traceParent?.rawValue == Self.parent)

            let credential = try NewRevocation(
                clientID: "com.example.app",
                externalReference: "acct-2",
                credential: Credential(kind: .refreshToken, secret: "r.acct-2")
            )
            let deletion = try await queue.deletions.request(
                accountReference: "acct-2",
                credential: credential,
                actor: "test",
                traceParent: TraceParent(Self.other)
            )
            let requests = try await queue.list(RevocationFilter(externalReference: "acct-2"))
            #expect(!requests.isEmpty && requests.allSatisfy { $0.deletionID == deletion.deletion.id && $0.traceParent?.rawValue == Self.other })
        }
    }

    @Test func aTraceParentIsCheckedAsW3CTraceContextSays() {
        #expect(TraceParent(Self.parent)?.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(TraceParent(Self.parent)?.parentID == "00f067aa0ba902b7")
        // A later version keeps its first four fields.
        #expect(TraceParent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-follows")?.rawValue == Self.parent)
        for malformed in [
            "", Self.parent.uppercased(), Self.parent + "-", "ff" + Self.parent.dropFirst(2), String(Self.parent.dropLast()),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            #expect(TraceParent(malformed) == nil, "\(malformed)")
        }
    }
}
