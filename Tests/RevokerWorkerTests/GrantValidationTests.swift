import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// `custody.validate_every_days`: held grants are validated now and then, at most once a day,
/// so a grant the user removed while notifications were not configured is found and erased.
@Suite("Validating held grants")
struct GrantValidationTests {
    static let notes = "com.example.notes"
    static let google = "1000-notes.apps.googleusercontent.com"
    static let daily: [String: any Sendable] = ["custody": ["validate_every_days": 1]]

    /// Holds a refresh token minted in the sandbox for `account` (registered, then validated once
    /// by a drain); returns the grant and the sandbox's grant id.
    static func hold(
        _ stack: RevokerTestStack,
        _ provider: ProviderName,
        account: String
    ) async throws -> (grant: Grant, sandbox: String, token: String) {
        let (clientID, subject) = provider == .google ? (google, "1100000\(account.count)\(account.hashValue & 0xffff)") : (notes, "000.\(account)")
        let minted =
            provider == .google
            ? try await stack.sandbox.google.mintRefreshToken(clientID: clientID, subject: subject)
            : try await stack.sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
        stack.secrets.add(minted.value)
        let registered = try await stack.queue.custody.register(
            try NewGrant(
                provider: provider.rawValue,
                clientID: clientID,
                accountReference: account,
                credential: Credential(kind: .refreshToken, secret: minted.value),
                userID: subject
            ),
            actor: "test"
        )
        _ = try await stack.drain()
        let held = try #require(try await stack.queue.custody.grant(id: registered.grant.id))
        #expect(held.state == .held && held.userSource == .verifiedIDToken, "taken in once the provider proved it")
        return (held, minted.grantID, minted.value)
    }

    /// The sandbox's record of a grant.
    static func record(_ stack: RevokerTestStack, _ provider: ProviderName, _ id: String) async throws -> SandboxGrantReport {
        provider == .google ? try await stack.sandbox.google.grant(id) : try await stack.sandbox.admin.grant(id)
    }

    /// Sets back the time a grant was held, as if it had been held for `days`.
    static func age(_ stack: RevokerTestStack, _ grants: [Grant], days: Int) async throws {
        let ids = grants.map(\.id)
        try await stack.database.client.query(
            "UPDATE revoker.grants SET held_at = held_at - make_interval(days => \(days)::int) WHERE id = ANY(\(ids))"
        ).collect()
    }

    @Test func aDueGrantIsValidatedAtMostOnceADayAndOneTheUserRemovedDiesWithItsToken() async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.google]], settings: Self.daily) { stack in
            let live = try await Self.hold(stack, .apple, account: "live")
            let removedApple = try await Self.hold(stack, .apple, account: "removed-apple")
            let removedGoogle = try await Self.hold(stack, .google, account: "removed-google")
            let liveGoogle = try await Self.hold(stack, .google, account: "live-google")
            let recent = try await Self.hold(stack, .apple, account: "recent")
            try await Self.age(stack, [live.grant, removedApple.grant, removedGoogle.grant, liveGoogle.grant], days: 2)
            // The users remove the app's access at the provider; no notification reaches Revoker.
            try await RevokerApp.withProviders(stack.configuration, logger: stack.logger) { providers in
                try await providers.app(provider: .apple, clientID: Self.notes)?.revoke(token: removedApple.token, kind: .refreshToken)
                try await providers.app(provider: .google, clientID: Self.google)?.revoke(token: removedGoogle.token, kind: .refreshToken)
            }

            let report = try await stack.drain()
            #expect(report.succeeded == 4, "four validations: \(report)")
            for (held, provider) in [(live, ProviderName.apple), (liveGoogle, .google)] {
                let grant = try #require(try await stack.queue.custody.grant(id: held.grant.id))
                #expect(grant.state == .held && grant.validatedAt != nil && grant.endReason == nil)
                let record = try await Self.record(stack, provider, held.sandbox)
                #expect(
                    record.validations == 2 && record.revokeCalls == 0 && !record.revoked,
                    "validated (and once when registered), not revoked: \(record)"
                )
            }
            for (removed, provider) in [(removedApple, ProviderName.apple), (removedGoogle, .google)] {
                let grant = try #require(try await stack.queue.custody.grant(id: removed.grant.id))
                #expect(grant.state == .dead && grant.endReason == "already_invalid" && grant.endedAt != nil)
                let record = try await Self.record(stack, provider, removed.sandbox)
                #expect(record.rejectedValidations == 1 && record.revokeCalls == 1, "one refused validation, no revoke of ours: \(record)")
            }
            let recentGrant = try #require(try await stack.queue.custody.grant(id: recent.grant.id))
            #expect(recentGrant.state == .held && recentGrant.validatedAt == nil, "held less than a day: not validated")
            #expect(try await Self.record(stack, .apple, recent.sandbox).validations == 1, "only when it was registered")

            // The dead grants keep no token; the validations are requests with their own trail and no event.
            let tokens = try await stack.database.client.query(
                "SELECT count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL AND state = 'dead'"
            ).collect()
            #expect(try tokens.first?.decode(Int.self) == 0)
            let validations = try await stack.requests().filter { $0.purpose == .validate }
            #expect(validations.count == 4)
            #expect(Set(validations.compactMap(\.outcome)) == [.live, .alreadyInvalid])
            let events = try await stack.database.client.query(
                "SELECT count(*)::int FROM revoker.outbox_events WHERE request_id = ANY(\(validations.map(\.id)))"
            ).collect()
            #expect(try events.first?.decode(Int.self) == 0, "a validation tells the backend nothing")
            let trail = try await stack.audit()
            let ended = trail.filter { $0.event == "grant_ended" && validations.map(\.id).contains($0.requestID ?? UUID()) }
            #expect(ended.count == 2 && ended.allSatisfy { $0.detail?.contains("found invalid when validated") == true })

            // A day has not passed: a second run validates nothing again.
            let again = try await stack.drain()
            #expect(again.succeeded == 0)
            #expect(try await Self.record(stack, .apple, live.sandbox).validations == 2)
            // Aged past a day once more, the live grant is validated once more.
            try await stack.database.client.query(
                "UPDATE revoker.grants SET validated_at = validated_at - interval '25 hours' WHERE id = \(live.grant.id)"
            ).collect()
            #expect(try await stack.drain().succeeded == 1)
            #expect(try await Self.record(stack, .apple, live.sandbox).validations == 3)
            try await stack.expectNoSecretsInAudit()
        }
    }

    @Test func aValidationWaitingWhenTheAccountIsDeletedIsCancelledAndTheGrantRevokedOnce() async throws {
        try await RevokerTestStack.with(settings: Self.daily) { stack in
            let held = try await Self.hold(stack, .apple, account: "leaving")
            try await Self.age(stack, [held.grant], days: 3)
            #expect(try await stack.queue.custody.scheduleValidations(every: .seconds(86_400), limit: 10, actor: "test") == 1)
            #expect(try await stack.queue.custody.scheduleValidations(every: .seconds(86_400), limit: 10, actor: "test") == 0, "one at a time")

            let deletion = try await stack.queue.deletions.request(accountReference: "leaving", actor: "test").deletion
            let validation = try #require(try await stack.requests().first { $0.purpose == .validate })
            #expect(validation.state == .cancelled, "the grant is being revoked: nothing to validate")
            _ = try await stack.drain()
            let done = try await stack.queue.deletions.settled(deletion, within: .seconds(30))
            #expect(done.outcome == .revoked)
            #expect(try await stack.queue.custody.grant(id: held.grant.id)?.state == .revoked)
            let record = try await Self.record(stack, .apple, held.sandbox)
            #expect(record.revocations == 1 && record.validations == 2, "proven when registered and by the deletion, revoked once: \(record)")
            let trail = try await stack.audit().filter { $0.requestID == validation.id }.map(\.event)
            #expect(trail == ["enqueued", "cancelled"], "\(trail)")
        }
    }

    /// The user deleted their Apple account once, then came back under the same id and signed
    /// in: the new grant is a new consent, and neither its validation nor its deletion may take
    /// the old message for its end.
    @Test func aMessageFromBeforeTheGrantWasHeldDoesNotEndIt() async throws {
        try await RevokerTestStack.with(settings: Self.daily) { stack in
            try await stack.database.client.query(
                """
                INSERT INTO revoker.provider_messages
                    (provider, message_id, client_id, type, user_id, ends_grants, ends_account, event_type, event_time, issued_at,
                     issuer, key_id, received_at)
                VALUES ('apple', 'old-deletion', \(Self.notes), 'account-delete', '000.returning', true, true, 'apple.account_deleted',
                        now() - interval '40 days', now() - interval '40 days', 'https://appleid.apple.com', 'k',
                        now() - interval '40 days')
                """
            ).collect()
            let held = try await Self.hold(stack, .apple, account: "returning")
            try await Self.age(stack, [held.grant], days: 2)
            #expect(try await stack.drain().succeeded == 1)
            #expect(try await stack.queue.custody.grant(id: held.grant.id)?.state == .held, "validated live, not ended by the old message")
            let deletion = try await stack.queue.deletions.request(accountReference: "returning", actor: "test").deletion
            _ = try await stack.drain()
            #expect(try await stack.queue.deletions.settled(deletion, within: .seconds(30)).outcome == .revoked)
            #expect(try await stack.queue.custody.grant(id: held.grant.id)?.state == .revoked)
            #expect(try await Self.record(stack, .apple, held.sandbox).revocations == 1, "revoked at the provider, not taken for gone")
        }
    }

    /// A grant taken in while its account's deletion runs gets its revocation when it is held,
    /// made by the request the drain just ended. Each round another request ends at about the
    /// same time, so that the hold may end while the drain claims after that one; the drain must
    /// still carry out the revocation it made (the docs' commands once saw one end with it waiting).
    @Test func oneDrainRevokesTheGrantItTakesInForAnAccountBeingDeleted() async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.google]]) { stack in
            // One provider call each, of the same length: a Google revocation, an Apple validation.
            try await stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 300))
            try await stack.sandbox.google.setFaults(SandboxFaults(latencyMilliseconds: 300))
            for round in 0..<6 {
                _ = try await stack.enqueue(provider: .google, clientID: Self.google, reference: "other\(round)", kind: .refreshToken)
                let minted = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "000.leaving\(round)")
                stack.secrets.add(minted.value)
                _ = try await stack.queue.custody.register(
                    try NewGrant(
                        provider: "apple",
                        clientID: Self.notes,
                        accountReference: "leaving\(round)",
                        credential: Credential(kind: .refreshToken, secret: minted.value),
                        userID: "000.leaving\(round)"
                    ),
                    actor: "test"
                )
                let deletion = try await stack.queue.deletions.request(accountReference: "leaving\(round)", actor: "test").deletion
                let report = try await stack.drain()
                #expect(report.remainder?.waiting == 0, "round \(round): nothing left waiting: \(report)")
                #expect(report.succeeded == 3, "round \(round): the other revoked, the grant taken in, then revoked: \(report)")
                #expect(try await stack.queue.deletions.deletion(id: deletion.id)?.outcome == .revoked, "round \(round)")
                #expect(try await Self.record(stack, .apple, minted.grantID).revocations == 1, "round \(round)")
            }
        }
    }

    @Test func theIntervalIsADayAtLeast() async throws {
        try await RevokerTestStack.with { stack in
            await #expect(throws: RevokerStoreError.self) {
                try await stack.queue.custody.scheduleValidations(every: .seconds(3600), limit: 10, actor: "test")
            }
            // The SQL function holds to the same floor.
            await #expect(throws: PSQLError.self) {
                try await stack.database.client.query("SELECT revoker.schedule_grant_validations(interval '23 hours', 10, 'test')").collect()
            }
        }
    }
}
