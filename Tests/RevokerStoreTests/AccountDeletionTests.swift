import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// The rules of an account's deletion in the database, driven through the queue as a worker
/// drives it: grants still being taken in, failed revocations, and what asking again does.
@Suite("Account deletions")
struct AccountDeletionTests {
    static func grant(_ reference: String, _ credential: Credential) throws -> NewGrant {
        try NewGrant(clientID: "com.example.app", accountReference: reference, credential: credential)
    }

    static func count(_ db: ScratchDatabase, _ sql: String) async throws -> Int {
        try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect().first?.decode(Int.self) ?? -1
    }

    /// Registers `token` and takes it into custody as a worker does once the provider proved it.
    static func hold(_ queue: RevocationQueue, _ reference: String, _ token: String, user: String? = nil) async throws -> Grant {
        let registered = try await queue.custody.register(grant(reference, Credential(kind: .refreshToken, secret: token)), actor: "t").grant
        #expect(registered.state == .pending, "held only once the provider proved it")
        let claimed = try #require(try await queue.claim(batch: 10, lease: .seconds(60), owner: "w").first { $0.request.grantID == registered.id })
        #expect(
            try await queue.custody.hold(
                claimed.lease,
                grantID: registered.id,
                token: Credential(kind: .refreshToken, secret: token),
                verifiedUserID: user
            )
        )
        return try #require(try await queue.custody.grant(id: registered.id))
    }

    /// Carries every due request as a worker whose provider answers well would: holds take their
    /// grant in, revocations end revoked.
    static func work(_ queue: RevocationQueue) async throws {
        while true {
            let claimed = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            if claimed.isEmpty { return }
            for item in claimed {
                if item.request.purpose == .hold, let grantID = item.request.grantID {
                    #expect(try await queue.custody.hold(item.lease, grantID: grantID, token: item.credential, verifiedUserID: nil))
                } else {
                    #expect(try await queue.finish(item.lease, state: .succeeded, outcome: .revoked, error: nil, events: []))
                }
            }
        }
    }

    @Test func aGrantStillBeingTakenInIsRevokedOnceHeldAndOneThatFailsEndsIt() async throws {
        try await Fixtures.withQueue { db, queue in
            let code = try await queue.custody.register(Self.grant("acct", Credential(kind: .authorizationCode, secret: "c.one")), actor: "t").grant
            let other = try await queue.custody.register(Self.grant("acct", Credential(kind: .authorizationCode, secret: "c.two")), actor: "t").grant
            let asked = try await queue.deletions.request(accountReference: "acct", actor: "t").deletion
            #expect(asked.state == .pending && asked.grants.map(\.id) == [code.id, other.id])
            #expect(asked.requests.isEmpty, "nothing to revoke until a grant is held")

            let holds = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            #expect(holds.count == 2 && holds.allSatisfy { $0.request.purpose == .hold })
            let first = try #require(holds.first { $0.request.grantID == code.id })
            let second = try #require(holds.first { $0.request.grantID == other.id })
            #expect(
                try await queue.custody.hold(
                    first.lease,
                    grantID: code.id,
                    token: Credential(kind: .refreshToken, secret: "r.held-one"),
                    verifiedUserID: "user-1"
                )
            )
            let revoking = try #require(try await queue.custody.grant(id: code.id))
            #expect(revoking.state == .revoking && revoking.deletionID == asked.id, "taken in while its account is being deleted: revoked next")
            #expect(try await queue.finish(second.lease, state: .failed, outcome: .codeRejected, error: nil, events: []))

            let revokes = try await queue.claim(batch: 10, lease: .seconds(60), owner: "w")
            let revoke = try #require(revokes.first)
            #expect(revokes.count == 1 && revoke.request.purpose == .revoke && revoke.request.deletionID == asked.id)
            #expect(revoke.credential == Credential(kind: .refreshToken, secret: "r.held-one"), "the grant's own token, opened there")
            #expect(revoke.request.userID == "user-1", "the grant's user, checked against the token's identity")
            #expect(try await queue.deletions.deletion(id: asked.id)?.state == .pending)
            #expect(try await queue.finish(revoke.lease, state: .succeeded, outcome: .revoked, error: nil, events: []))

            let done = try #require(try await queue.deletions.deletion(id: asked.id))
            #expect(done.state == .completed && done.outcome == .revoked, "every grant ended: one revoked, one never held")
            #expect(done.grants.map(\.state) == [.revoked, .failed])
            #expect(done.grants.map { done.outcome(of: $0) } == ["revoked", "code_rejected"])
            #expect(done.grantOutcomes == ["revoked", "code_rejected"])
            #expect(try await Self.count(db, "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL") == 0)
            #expect(
                try await Self.count(db, "SELECT count(*)::int FROM revoker.outbox_events WHERE type = 'account.deletion_completed'") == 1
            )
        }
    }

    @Test func aFailedRevocationLeavesTheGrantHeldAndAskingAgainRetriesIt() async throws {
        try await Fixtures.withQueue { db, queue in
            let held = try await Self.hold(queue, "acct", "r.token")
            #expect(held.state == .held)
            let asked = try await queue.deletions.request(accountReference: "acct", actor: "t")
            guard case .created(let deletion) = asked else { throw RevokerStoreError(.database, "not created") }
            let replay = try await queue.deletions.request(accountReference: "acct", actor: "t")
            #expect(replay == .existing(try #require(try await queue.deletions.deletion(id: deletion.id))), "asked again while it runs")
            let narrower = try await queue.deletions.request(accountReference: "acct", clientIDs: ["com.example.app"], actor: "t")
            #expect(narrower.deletion.id == deletion.id, "a deletion of every app already covers one app's")
            let other = try await queue.deletions.request(accountReference: "acct", clientIDs: ["com.example.other"], actor: "t")
            #expect(other.deletion.id == deletion.id, "and any other app's")

            let claimed = try #require(try await queue.claim(batch: 10, lease: .seconds(60), owner: "w").first)
            #expect(try await queue.finish(claimed.lease, state: .failed, outcome: .exhausted, error: nil, events: []))
            let incomplete = try #require(try await queue.deletions.deletion(id: deletion.id))
            #expect(incomplete.outcome == .incomplete && incomplete.grants.first?.state == .held, "still held, token kept: \(incomplete)")
            #expect(incomplete.outcome(of: try #require(incomplete.grants.first)) == "exhausted")
            #expect(incomplete.grantOutcomes.first == "exhausted")
            #expect(try await Self.count(db, "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL") == 1)

            let retry = try await queue.deletions.request(accountReference: "acct", actor: "t")
            guard case .created(let second) = retry else { throw RevokerStoreError(.database, "not created") }
            #expect(second.id != deletion.id && second.grants.map(\.id) == [held.id] && second.requests.count == 1)
            let again = try #require(try await queue.claim(batch: 10, lease: .seconds(60), owner: "w").first)
            #expect(try await queue.finish(again.lease, state: .succeeded, outcome: .alreadyInvalid, error: nil, events: []))
            let done = try #require(try await queue.deletions.deletion(id: second.id))
            #expect(done.outcome == .revoked && done.grants.first?.state == .dead && done.grants.first?.endReason == "already_invalid")
            #expect(try await Self.count(db, "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL") == 0)

            let nothing = try await queue.deletions.request(accountReference: "acct", actor: "t")
            #expect(nothing.deletion.outcome == .nothingHeld && nothing.deletion.grants.isEmpty)
            let trail = try await db.client.query(
                "SELECT event FROM revoker.audit_events WHERE request_id = \(second.id) ORDER BY id"
            ).collect().map { try $0.decode(String.self) }
            #expect(trail == ["deletion_requested", "deletion_grant", "grant_ended", "deletion_completed"])
        }
    }

    /// A sign-in racing a deletion of its account: the registration's transaction is open when
    /// the deletion is asked. The deletion waits for it and covers its grant; a sign-in while the
    /// deletion runs joins it; one after the deletion completed is a new sign-in, held.
    @Test func aSignInRacingADeletionIsCoveredByItOrComesWhollyAfterIt() async throws {
        try await Fixtures.withQueue { db, queue in
            let asked = try await db.client.withConnection { connection in
                let logger = Logger(label: "race")
                _ = try await connection.query("BEGIN", logger: logger).collect()
                _ = try await connection.query(
                    "SELECT revoker.register_grant('apple', 'com.example.app', 'racing', 'refresh_token', 'r.racing')",
                    logger: logger
                ).collect()
                async let deletion = queue.deletions.request(accountReference: "racing", actor: "t")
                try await eventually("the deletion waits for the sign-in's transaction", timeout: .seconds(30)) {
                    try await Self.count(db, "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 1
                }
                _ = try await connection.query("COMMIT", logger: logger).collect()
                return try await deletion
            }
            guard case .created(let deletion) = asked else { throw RevokerStoreError(.database, "not created") }
            #expect(deletion.state == .pending && deletion.grants.count == 1, "the sign-in that committed first is covered")

            let joining = try await queue.custody.register(Self.grant("racing", Credential(kind: .refreshToken, secret: "r.joining")), actor: "t")
            #expect(joining.grant.deletionID == deletion.id, "a sign-in while the deletion runs joins it")
            try await Self.work(queue)
            let done = try #require(try await queue.deletions.deletion(id: deletion.id))
            #expect(done.state == .completed && done.outcome == .revoked, "\(done)")
            #expect(done.grants.map(\.state) == [.revoked, .revoked])

            let after = try await queue.custody.register(Self.grant("racing", Credential(kind: .refreshToken, secret: "r.after")), actor: "t")
            #expect(after.grant.deletionID == nil, "after the deletion completed, a sign-in is a new one")
            #expect(try await Self.count(db, "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL") == 0)
        }
    }
}
