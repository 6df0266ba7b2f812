import AppleSignIn
import AppleSignInSandbox
import Foundation
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

@Suite("The worker against PostgreSQL and the sandbox")
struct PipelineTests {
    @Test func aMixedBatchDrainsToTheRightOutcomeForEachRequest() async throws {
        try await RevokerTestStack.with { harness in
            let notes = "com.example.notes"
            let photos = "com.example.photos"
            let live: [(String, String, CredentialKind, String?)] = [
                (notes, "n-code", .authorizationCode, nil),
                (notes, "n-code-redirect", .authorizationCode, "https://notes.example.com/callback"),
                (notes, "n-refresh", .refreshToken, nil),
                (notes, "n-access", .accessToken, nil),
                (photos, "p-code", .authorizationCode, nil),
                (photos, "p-refresh", .refreshToken, nil),
                (photos, "p-refresh-2", .refreshToken, nil),
            ]
            var grants: [String: String] = [:]
            for (clientID, reference, kind, redirectURI) in live {
                grants[reference] = try await harness.enqueue(clientID: clientID, reference: reference, kind: kind, redirectURI: redirectURI).grantID
            }
            // The user already revoked it in Settings.
            let revoked = try await harness.enqueue(clientID: notes, reference: "n-already", kind: .refreshToken)
            try await harness.sandbox.withClient { client in
                let app = AppleAppClient(
                    client: client,
                    signer: try await ClientSecretSigner(app: try #require(harness.configuration.settings(AppleSettings.self)?.apps[notes]).apple)
                )
                try await app.revoke(token: revoked.secret, hint: .refreshToken)
            }
            #expect(try await harness.sandbox.admin.grant(revoked.grantID).revoked)
            // The backend names another Apple user than the one the grant belongs to.
            let mismatch = try await harness.enqueue(
                clientID: photos,
                reference: "p-mismatch",
                kind: .refreshToken,
                subject: "000111.real",
                userID: "000222.other"
            )
            // The right Apple user named: revoked.
            let matching = try await harness.enqueue(
                clientID: photos,
                reference: "p-match",
                kind: .refreshToken,
                subject: "000333.same",
                userID: "000333.same"
            )
            grants["p-match"] = matching.grantID

            let report = try await harness.drain()
            let requests = try await harness.requests()
            let outcome = { (reference: String) in requests.first { $0.externalReference == reference }?.outcome }

            for (_, reference, _, _) in live { #expect(outcome(reference) == .revoked, "\(reference)") }
            #expect(outcome("p-match") == .revoked)
            #expect(outcome("n-already") == .alreadyInvalid)
            #expect(outcome("p-mismatch") == .subjectMismatch)
            #expect(report.succeeded == 9 && report.failed == 1)
            #expect(requests.allSatisfy { $0.state.isFinal && !$0.hasCredential }, "every credential is erased once final")

            for (reference, grantID) in grants {
                let grant = try await harness.sandbox.admin.grant(grantID)
                #expect(grant.revoked && grant.revocations == 1, "\(reference) revoked exactly once")
                if reference.contains("code") {
                    #expect(grant.codeExchanges == 1 && grant.rejectedCodeExchanges == 0, "\(reference) exchanged exactly once")
                }
            }
            let mismatched = try await harness.sandbox.admin.grant(mismatch.grantID)
            #expect(!mismatched.revoked && mismatched.revokeCalls == 0, "someone else's grant is never revoked")
            // One client secret per request (its token call and revoke share it), and the test's own.
            #expect(try await harness.sandbox.admin.statistics().clientSecrets == requests.count + 1)

            let audit = try await harness.audit()
            let events = { (reference: String) in audit.filter { $0.externalReference == reference }.map(\.event) }
            #expect(
                events("n-code") == [
                    "enqueued", "claimed", "exchange_started", "token_exchanged", "id_token_verified", "revoked", "succeeded", "credential_erased",
                ]
            )
            #expect(events("p-match").contains("id_token_verified"))
            #expect(events("p-mismatch").contains("id_token_mismatch"))
            #expect(audit.filter { $0.event == "revoked" }.allSatisfy { $0.latencyMilliseconds != nil && $0.httpStatus == 200 })
            try await harness.expectNoSecretsInAudit()
        }
    }

    @Test func transientFaultsAreRetriedAndRetryAfterIsHonoured() async throws {
        let worker: [String: any Sendable] = ["retry_base_seconds": 0.05, "retry_cap_seconds": 0.4, "max_attempts": 40, "poll_interval_seconds": 0.1]
        try await RevokerTestStack.with(worker: worker) { harness in
            var grants: [String] = []
            for index in 0..<24 {
                let kind: CredentialKind = index % 3 == 0 ? .authorizationCode : .refreshToken
                grants.append(try await harness.enqueue(clientID: "com.example.notes", reference: "u\(index)", kind: kind).grantID)
            }
            try await harness.sandbox.admin.setFaults(SandboxFaults(unavailableRate: 0.3, throttleRate: 0.1, retryAfterSeconds: 1))
            let report = try await harness.drain()

            let requests = try await harness.requests()
            #expect(
                requests.allSatisfy { $0.outcome == .revoked },
                "\(requests.filter { $0.outcome != .revoked }.map { "\($0.externalReference) \($0.state) \($0.outcome?.rawValue ?? "-") \($0.lastErrorCode ?? "-") attempts=\($0.attempts)" }) \(report)"
            )
            #expect(report.retriesScheduled > 0)
            let audit = try await harness.audit()
            #expect(audit.filter { $0.event == "retry_scheduled" }.count == report.retriesScheduled)
            #expect(audit.contains { $0.event == "apple_error" && $0.httpStatus == 503 })

            var throttled = 0
            for grantID in grants {
                let grant = try await harness.sandbox.admin.grant(grantID)
                #expect(grant.revocations == 1)
                for (call, next) in zip(grant.calls, grant.calls.dropFirst()) where call.status == 429 {
                    throttled += 1
                    #expect(next.at - call.at >= 0.999, "the retry came \(next.at - call.at) s after a 429 asking for 1 s")
                }
            }
            #expect(throttled > 0, "the run met at least one 429")
        }
    }

    @Test func aMisconfiguredAppPausesWithoutBurningAttemptsAndResumesOnceFixed() async throws {
        try await RevokerTestStack.with(worker: ["pause_probe_seconds": 0.5, "poll_interval_seconds": 0.1]) { harness in
            try await Self.pauseAndResume(harness)
        }
    }

    static func pauseAndResume(_ harness: RevokerTestStack) async throws {
        let broken = harness.files.apps(LocalAppFiles.self)[0]
        // Apple knows another key for this app than the one Revoker signs with.
        try await harness.sandbox.admin.register(
            .init(clientID: broken.clientID, teamID: broken.teamID, keyID: broken.keyID, publicKeyPEM: LocalAppFiles.otherPublicKeyPEM())
        )
        let brokenGrants = try await harness.enqueueMany(clientID: broken.clientID, prefix: "b", count: 5)
        _ = try await harness.enqueueMany(clientID: "com.example.photos", prefix: "ok", count: 5)
        let first = try await harness.drain()
        let before = try await harness.requests()
        #expect(before.filter { $0.clientID == "com.example.photos" }.allSatisfy { $0.outcome == .revoked })
        let waiting = before.filter { $0.clientID == broken.clientID }
        #expect(waiting.allSatisfy { $0.state == .pending && $0.attempts == 0 && $0.lastErrorCode == "invalid_client" }, "no attempt burned")
        #expect(first.paused >= 1 && first.failed == 0)
        let paused = try await harness.queue.pausedApps()
        #expect(paused.map(\.clientID) == [broken.clientID])
        let loud = harness.logs.all.filter { $0.hasPrefix("error") && $0.contains("pausing the app") }
        #expect(loud.count == 1, "one loud error per pause period, not one per request")

        // The operator fixes the key (here: Apple learns the key Revoker uses); a probe resumes the app.
        try await harness.files.register(with: harness.sandbox)
        // Past the next probe even if the first drain's last probe came at its very end.
        try await Task.sleep(for: .milliseconds(1500))
        try await harness.drainUntil { $0.outcome == .revoked }
        let after = try await harness.requests()
        #expect(after.allSatisfy { $0.outcome == .revoked })
        #expect(try await harness.queue.pausedApps().isEmpty)
        for grantID in brokenGrants { #expect(try await harness.sandbox.admin.grant(grantID).revocations == 1) }
        let audit = try await harness.audit()
        #expect(audit.contains { $0.event == "app_paused" } && audit.contains { $0.event == "app_resumed" })
    }

    @Test func retriesEndExhaustedAfterMaxAttempts() async throws {
        try await RevokerTestStack.with(worker: ["retry_base_seconds": 0.01, "retry_cap_seconds": 0.02, "poll_interval_seconds": 0.1]) { harness in
            let grant = try await harness.enqueue(clientID: "com.example.notes", reference: "down", kind: .refreshToken, maxAttempts: 3).grantID
            try await harness.sandbox.admin.setFaults(SandboxFaults(internalErrorRate: 1))
            let report = try await harness.drain()
            let request = try #require(try await harness.requests().first)
            #expect(request.state == .failed && request.outcome == .exhausted && request.attempts == 3)
            #expect(report.finished[.exhausted] == 1 && report.retriesScheduled == 2)
            #expect(try await harness.sandbox.admin.grant(grant).calls.count == 3)
        }
    }
}
