import AppleSignIn
import AppleSignInSandbox
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

@Suite("The worker revokes Google grants, beside Apple's")
struct GooglePipelineTests {
    static let notes = "1000-notes.apps.googleusercontent.com"
    static let other = "2000-other.apps.googleusercontent.com"

    @Test func everyAnswerOfGoogleEndsInTheRightOutcome() async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.notes]]) { harness in
            let live: [(String, CredentialKind, String?)] = [
                ("g-code", .authorizationCode, nil),
                ("g-code-redirect", .authorizationCode, "https://notes.example.com/oauth2"),
                ("g-refresh", .refreshToken, nil),
                ("g-access", .accessToken, nil),
            ]
            var grants: [String: String] = [:]
            for (reference, kind, redirectURI) in live {
                grants[reference] = try await harness.enqueue(
                    provider: .google,
                    clientID: Self.notes,
                    reference: reference,
                    kind: kind,
                    redirectURI: redirectURI
                ).grantID
            }
            let matching = try await harness.enqueue(
                provider: .google,
                clientID: Self.notes,
                reference: "g-match",
                kind: .refreshToken,
                subject: "1101",
                userID: "1101"
            )
            grants["g-match"] = matching.grantID
            let mismatch = try await harness.enqueue(
                provider: .google,
                clientID: Self.notes,
                reference: "g-mismatch",
                kind: .refreshToken,
                subject: "1102",
                userID: "1999"
            )
            // The user removed the app's access in their Google account: the refresh says invalid_grant,
            // the revoke of an access token invalid_token.
            let gone = try await harness.enqueue(provider: .google, clientID: Self.notes, reference: "g-gone", kind: .refreshToken)
            let goneAccess = try await harness.enqueue(provider: .google, clientID: Self.notes, reference: "g-gone-access", kind: .accessToken)
            try await harness.sandbox.withGoogleClient { client in
                try await client.revoke(token: gone.secret)
                try await client.revoke(token: goneAccess.secret)
            }
            // A refresh token another OAuth client holds: Google says unauthorized_client.
            try await harness.sandbox.google.register(clientID: Self.other, clientSecret: "GOCSPX-other")
            let foreign = try await harness.sandbox.google.mintRefreshToken(clientID: Self.other, subject: "1103")
            harness.secrets.add(foreign.value)
            _ = try await harness.queue.enqueue(
                try NewRevocation(
                    provider: "google",
                    clientID: Self.notes,
                    externalReference: "g-foreign",
                    credential: Credential(kind: .refreshToken, secret: foreign.value)
                ),
                actor: "test"
            )

            let report = try await harness.drain()
            let requests = try await harness.requests()
            let outcome = { (reference: String) in requests.first { $0.externalReference == reference }?.outcome }
            for (reference, _, _) in live { #expect(outcome(reference) == .revoked, "\(reference)") }
            #expect(outcome("g-match") == .revoked)
            #expect(outcome("g-mismatch") == .subjectMismatch)
            #expect(outcome("g-gone") == .alreadyInvalid)
            #expect(outcome("g-gone-access") == .alreadyInvalid)
            #expect(outcome("g-foreign") == .rejected)
            #expect(requests.first { $0.externalReference == "g-foreign" }?.lastErrorCode == "unauthorized_client")
            #expect(report.paused == 0, "one request's refusal does not pause the app")
            #expect(requests.allSatisfy { $0.provider == "google" && $0.state.isFinal && !$0.hasCredential })

            for (reference, grantID) in grants {
                let grant = try await harness.sandbox.google.grant(grantID)
                #expect(grant.revoked && grant.revocations == 1 && grant.revokeCalls == 1, "\(reference) revoked exactly once")
                if reference.contains("code") { #expect(grant.codeExchanges == 1 && grant.rejectedCodeExchanges == 0, "\(reference)") }
            }
            let refused = try await harness.sandbox.google.grant(mismatch.grantID)
            #expect(!refused.revoked && refused.revokeCalls == 0, "someone else's grant is never revoked")
            #expect(try await harness.sandbox.google.grant(foreign.grantID).revoked == false)

            let audit = try await harness.audit()
            let events = { (reference: String) in audit.filter { $0.externalReference == reference }.map(\.event) }
            #expect(events("g-code").contains("exchange_started") && events("g-code").contains("token_exchanged"))
            #expect(events("g-refresh").contains("token_validated") && events("g-refresh").contains("id_token_verified"))
            #expect(audit.contains { $0.externalReference == "g-refresh" && $0.event == "revoked" && $0.providerEndpoint == "/revoke" })
            #expect(audit.contains { $0.externalReference == "g-gone-access" && $0.httpStatus == 400 && $0.providerError == "invalid_token" })
            try await harness.expectNoSecretsInAudit()
        }
    }

    @Test func oneAccountsAppleAndGoogleGrantsAreBothRevoked() async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.notes]]) { harness in
            let apple = try await harness.enqueue(clientID: "com.example.notes", reference: "account-42", kind: .refreshToken)
            let google = try await harness.enqueue(provider: .google, clientID: Self.notes, reference: "account-42", kind: .authorizationCode)
            let report = try await harness.drain()
            #expect(report.succeeded == 2)
            let requests = try await harness.requests().filter { $0.externalReference == "account-42" }
            #expect(Set(requests.map(\.provider)) == ["apple", "google"])
            #expect(requests.allSatisfy { $0.outcome == .revoked })
            #expect(try await harness.sandbox.admin.grant(apple.grantID).revocations == 1)
            #expect(try await harness.sandbox.google.grant(google.grantID).revocations == 1)
            let finals = try await harness.audit().filter { $0.externalReference == "account-42" && $0.event == "revoked" }
            #expect(Set(finals.map(\.clientID)) == ["com.example.notes", Self.notes])
        }
    }

    @Test func aGoogleAppWithAWrongSecretPausesWithoutBurningAttemptsAndResumesOnceFixed() async throws {
        let worker: [String: any Sendable] = ["pause_probe_seconds": 0.5, "poll_interval_seconds": 0.1, "retry_base_seconds": 0.05]
        try await RevokerTestStack.with(apps: [.google: [Self.notes]], worker: worker) { harness in
            // Google knows another secret for the client than the one Revoker has.
            try await harness.sandbox.google.register(clientID: Self.notes, clientSecret: "GOCSPX-rotated-in-the-console")
            var grants: [String] = []
            for index in 0..<4 {
                grants.append(try await harness.enqueue(provider: .google, clientID: Self.notes, reference: "w\(index)", kind: .refreshToken).grantID)
            }
            let first = try await harness.drain()
            let waiting = try await harness.requests()
            #expect(waiting.allSatisfy { $0.state == .pending && $0.attempts == 0 && $0.lastErrorCode == "invalid_client" }, "no attempt burned")
            #expect(first.paused >= 1)
            #expect(try await harness.queue.pausedApps().map(\.clientID) == [Self.notes])

            // The operator puts the right secret back; a probe resumes the app.
            try await harness.files.register(with: harness.sandbox)
            try await Task.sleep(for: .milliseconds(1500))
            try await harness.drainUntil { $0.outcome == .revoked }
            #expect(try await harness.requests().allSatisfy { $0.outcome == .revoked })
            for grantID in grants { #expect(try await harness.sandbox.google.grant(grantID).revocations == 1) }
        }
    }

    @Test func googlesTransientAnswersAreRetried() async throws {
        let worker: [String: any Sendable] = ["retry_base_seconds": 0.05, "retry_cap_seconds": 0.4, "max_attempts": 40, "poll_interval_seconds": 0.1]
        try await RevokerTestStack.with(apps: [.google: [Self.notes]], worker: worker) { harness in
            var grants: [String] = []
            for index in 0..<12 {
                let kind: CredentialKind = index % 3 == 0 ? .authorizationCode : .refreshToken
                grants.append(try await harness.enqueue(provider: .google, clientID: Self.notes, reference: "t\(index)", kind: kind).grantID)
            }
            try await harness.sandbox.google.setFaults(SandboxFaults(internalErrorRate: 0.2, throttleRate: 0.1, retryAfterSeconds: 1, dropRate: 0.05))
            let report = try await harness.drain()
            let requests = try await harness.requests()
            #expect(requests.allSatisfy { $0.outcome == .revoked }, "\(report)")
            #expect(report.retriesScheduled > 0)
            for grantID in grants {
                let grant = try await harness.sandbox.google.grant(grantID)
                #expect(grant.revocations == 1)
                #expect(grant.codeExchanges <= 1)
            }
        }
    }
}
