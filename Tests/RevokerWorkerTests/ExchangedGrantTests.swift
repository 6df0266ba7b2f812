import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// A code's exchange brings a grant to life: what Revoker does not keep of it, it revokes.
@Suite("A grant Revoker's own exchange brought to life is never left alive")
struct ExchangedGrantTests {
    static let notes = "com.example.notes"
    static let web = "1000-notes.apps.googleusercontent.com"

    static func clientID(_ provider: ProviderName) -> String { provider == .apple ? notes : web }

    static func sandboxGrant(_ provider: ProviderName, _ id: String, _ stack: RevokerTestStack) async throws -> (revocations: Int, exchanges: Int) {
        if provider == .apple {
            let grant = try await stack.sandbox.admin.grant(id)
            return (grant.revocations, grant.codeExchanges)
        }
        let grant = try await stack.sandbox.google.grant(id)
        return (grant.revocations, grant.codeExchanges)
    }

    @Test(arguments: [ProviderName.apple, .google])
    func aCodeOfAnotherUserEndsAsSubjectMismatchWithTheGrantItsExchangeMadeRevoked(_ provider: ProviderName) async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.web]]) { stack in
            let clientID = Self.clientID(provider)
            // A deletion whose code is someone else's, and a sign-in registered for the wrong user.
            let deletion = try await stack.enqueue(
                provider: provider,
                clientID: clientID,
                reference: "account-1",
                kind: .authorizationCode,
                subject: "the-real-user",
                userID: "the-named-user"
            )
            let code =
                provider == .apple
                ? try await stack.sandbox.admin.mintCode(clientID: clientID, subject: "signed-in-user")
                : try await stack.sandbox.google.mintCode(.init(clientID: clientID, subject: "signed-in-user"))
            stack.secrets.add(code.value)
            let registered = try await stack.queue.custody.register(
                try NewGrant(
                    provider: provider.rawValue,
                    clientID: clientID,
                    accountReference: "account-2",
                    credential: Credential(kind: .authorizationCode, secret: code.value),
                    userID: "another-user"
                ),
                actor: "test"
            ).grant
            _ = try await stack.drain()

            let requests = try await stack.requests()
            #expect(requests.first { $0.externalReference == "account-1" }?.outcome == .subjectMismatch)
            let grant = try #require(try await stack.queue.custody.grant(id: registered.id))
            #expect(grant.state != .held && grant.userID != "signed-in-user", "another user's grant is not held as this account's")
            #expect(requests.allSatisfy { !$0.hasCredential })
            for (name, id) in [("deletion", deletion.grantID), ("sign-in", code.grantID)] {
                let (revocations, exchanges) = try await Self.sandboxGrant(provider, id, stack)
                #expect(exchanges == 1, "\(name)")
                #expect(revocations == 1, "\(name): the grant the exchange brought to life is revoked, not dropped")
            }
            let audit = try await stack.audit()
            #expect(
                audit.filter { $0.event == "revoked" && ($0.detail ?? "").contains("issued by this request's exchange") }.count == 2,
                "each revoke is on the record"
            )
            try await stack.expectNoSecretsInAudit()
        }
    }

    @Test func aSignInWithoutOfflineAccessEndsRejectedWithItsAccessTokenRevoked() async throws {
        try await RevokerTestStack.with(apps: [.google: [Self.web]]) { stack in
            let code = try await stack.sandbox.google.mintCode(.init(clientID: Self.web, subject: "u-online", offline: false))
            stack.secrets.add(code.value)
            let registered = try await stack.queue.custody.register(
                try NewGrant(
                    provider: "google",
                    clientID: Self.web,
                    accountReference: "account-online",
                    credential: Credential(kind: .authorizationCode, secret: code.value)
                ),
                actor: "test"
            ).grant
            _ = try await stack.drain()
            let grant = try #require(try await stack.queue.custody.grant(id: registered.id))
            #expect(grant.state != .held)
            #expect(try await stack.sandbox.google.grant(code.grantID).revocations == 1, "the access token the exchange issued is revoked")
        }
    }
}
