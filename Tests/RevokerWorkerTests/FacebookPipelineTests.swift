import FacebookLogin
import FacebookLoginSandbox
import Foundation
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// Facebook Login's grants through the same queue, retries and audit as Apple's and Google's:
/// a person's access token is proven at the Graph API and their login removed with the app's token.
@Suite("The worker ends Facebook logins, beside Apple's and Google's")
struct FacebookPipelineTests {
    static let app = "1234567890123456"
    static let other = "6543210987654321"

    @Test func everyAnswerOfFacebookEndsInTheRightOutcome() async throws {
        try await RevokerTestStack.with(apps: [.facebook: [Self.app]]) { harness in
            let facebook = FacebookSandboxAdmin(baseURL: harness.sandbox.baseURL + FacebookSandbox.prefix, httpClient: harness.sandbox.httpClient)
            let access = try await harness.enqueue(
                provider: .facebook,
                clientID: Self.app,
                reference: "f-access",
                kind: .accessToken,
                subject: "1001"
            )
            // A person's token enqueued with the user it should belong to: proven (whose it is), then ended.
            func enqueueProven(_ reference: String, person: String, userID: String) async throws -> SandboxAdmin.Minted {
                let minted = try await facebook.signIn(appID: Self.app, userID: person)
                harness.secrets.add(minted.value)
                _ = try await harness.queue.enqueue(
                    try NewRevocation(
                        provider: "facebook",
                        clientID: Self.app,
                        externalReference: reference,
                        userID: userID,
                        credential: Credential(kind: .accessToken, secret: minted.value)
                    ),
                    actor: "test"
                )
                return minted
            }
            let refresh = try await enqueueProven("f-proven", person: "1002", userID: "1002")
            let mismatch = try await enqueueProven("f-mismatch", person: "1003", userID: "1999")
            // The person removed the app in their Facebook settings before the deletion.
            let gone = try await harness.enqueue(provider: .facebook, clientID: Self.app, reference: "f-gone", kind: .accessToken, subject: "1004")
            try await facebook.userRemovesApp(appID: Self.app, userID: "1004")
            // Another app's token.
            try await facebook.registerApp(appID: Self.other, appSecret: "fedcba9876543210fedcba9876543210")
            let foreign = try await facebook.signIn(appID: Self.other, userID: "1005")
            harness.secrets.add(foreign.value)
            _ = try await harness.queue.enqueue(
                try NewRevocation(
                    provider: "facebook",
                    clientID: Self.app,
                    externalReference: "f-foreign",
                    credential: Credential(kind: .accessToken, secret: foreign.value)
                ),
                actor: "test"
            )

            let report = try await harness.drain()
            let requests = try await harness.requests()
            let outcome = { (reference: String) in requests.first { $0.externalReference == reference }?.outcome }
            #expect(outcome("f-access") == .revoked)
            #expect(outcome("f-proven") == .revoked)
            #expect(outcome("f-mismatch") == .subjectMismatch)
            #expect(outcome("f-gone") == .alreadyInvalid)
            #expect(outcome("f-foreign") == .rejected, "Facebook knows the token as another app's: not this app's grant")
            #expect(requests.first { $0.externalReference == "f-foreign" }?.lastErrorCode == "graph_100")
            #expect(report.paused == 0, "one request's refusal does not pause the app")
            #expect(requests.allSatisfy { $0.provider == "facebook" && $0.state.isFinal && !$0.hasCredential })

            for (reference, grantID) in [("f-access", access.grantID), ("f-proven", refresh.grantID)] {
                let grant = try await facebook.grant(grantID)
                #expect(grant.revoked && grant.revocations == 1 && grant.revokeCalls == 1, "\(reference) revoked exactly once: \(grant)")
                // The proof's debug_token names the person for the revoke as well: one call, not two.
                #expect(grant.validations == 1, "\(reference): debug_token asked once per attempt: \(grant)")
            }
            #expect(try await facebook.grant(mismatch.grantID).revokeCalls == 0, "someone else's grant is never revoked")
            #expect(try await facebook.grant(foreign.grantID).revoked == false)

            let audit = try await harness.audit()
            #expect(audit.contains { $0.externalReference == "f-proven" && $0.event == "token_validated" })
            #expect(audit.contains { $0.externalReference == "f-access" && $0.event == "revoked" && $0.providerEndpoint == "/permissions" })
            try await harness.expectNoSecretsInAudit()
        }
    }

    /// A wrong app secret is the app's configuration: Graph's error 190 pauses the app, and its
    /// requests wait instead of failing.
    @Test func aWrongAppSecretPausesTheApp() async throws {
        try await RevokerTestStack.with(apps: [.facebook: [Self.app]]) { harness in
            let facebook = FacebookSandboxAdmin(baseURL: harness.sandbox.baseURL + FacebookSandbox.prefix, httpClient: harness.sandbox.httpClient)
            try await facebook.registerApp(appID: Self.app, appSecret: "ffffffffffffffffffffffffffffffff")
            let access = try await harness.enqueue(
                provider: .facebook,
                clientID: Self.app,
                reference: "f-paused",
                kind: .accessToken,
                subject: "1006"
            )
            let report = try await harness.drain(deadline: .seconds(5))
            #expect(report.paused >= 1, "\(report)")
            let request = try #require(try await harness.requests().first)
            #expect(request.state == .pending && request.lastErrorCode == "graph_190", "\(request)")
            #expect(try await facebook.grant(access.grantID).revoked == false)
        }
    }
}
