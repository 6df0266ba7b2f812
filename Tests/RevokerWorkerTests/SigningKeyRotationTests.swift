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

/// A provider rotates the key that signs its identity tokens and retires the old one at once,
/// while a worker runs: every token answer after that names a key the worker's cache lacks.
@Suite("A provider's key rotation loses no grant")
struct SigningKeyRotationTests {
    static let notes = "com.example.notes"
    static let web = "1000-notes.apps.googleusercontent.com"
    static let worker: [String: any Sendable] = [
        "poll_interval_seconds": 0.1, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "concurrency": 4,
    ]

    /// What one round enqueued: deletions by code and by refresh token, each naming its user, and
    /// grants registered by code at sign-in.
    struct Round {
        var revocations: [(reference: String, grantID: String)] = []
        var holds: [(grant: UUID, subject: String)] = []
    }

    static func round(_ name: String, provider: ProviderName, _ stack: RevokerTestStack) async throws -> Round {
        let clientID = provider == .apple ? notes : web
        var round = Round()
        for (index, kind) in [CredentialKind.authorizationCode, .authorizationCode, .authorizationCode, .refreshToken].enumerated() {
            let (reference, user) = ("\(name)-delete-\(index)", "\(name)-user-\(index)")
            let grantID = try await stack.enqueue(
                provider: provider,
                clientID: clientID,
                reference: reference,
                kind: kind,
                subject: user,
                userID: user
            )
            .grantID
            round.revocations.append((reference, grantID))
        }
        for index in 0..<2 {
            let subject = "\(name)-signed-in-\(index)"
            let code =
                provider == .apple
                ? try await stack.sandbox.admin.mintCode(clientID: clientID, subject: subject)
                : try await stack.sandbox.google.mintCode(.init(clientID: clientID, subject: subject))
            stack.secrets.add(code.value)
            let new = try NewGrant(
                provider: provider.rawValue,
                clientID: clientID,
                accountReference: "\(name)-account-\(index)",
                credential: Credential(kind: .authorizationCode, secret: code.value)
            )
            round.holds.append((try await stack.queue.custody.register(new, actor: "test").grant.id, subject))
        }
        return round
    }

    /// Waits until every request has ended.
    static func settled(_ stack: RevokerTestStack) async throws -> [RevocationRequest] {
        try await eventuallyValue("every request ended") {
            let requests = try await stack.requests()
            return requests.allSatisfy(\.state.isFinal) ? requests : nil
        }
    }

    static func keyFetches(_ provider: ProviderName, _ stack: RevokerTestStack) async throws -> Int {
        let outcomes =
            provider == .apple
            ? try await stack.sandbox.admin.statistics().byOutcome : try await stack.sandbox.google.statistics().byOutcome
        let endpoint = provider == .apple ? "/auth/keys " : "/oauth2/v3/certs "
        return outcomes.filter { $0.key.hasPrefix(endpoint) }.values.reduce(0, +)
    }

    @Test(arguments: [ProviderName.apple, .google])
    func aRotationWhileTheWorkerRunsRevokesEveryLiveGrantAndBindsEveryHeldOneToItsUser(_ provider: ProviderName) async throws {
        try await RevokerTestStack.with(
            apps: [.google: [Self.web]],
            worker: Self.worker,
            sandbox: .init(keysMaxAge: .seconds(2)),
            google: .init(certsMaxAge: .seconds(2)),
            serving: .worker
        ) { stack in
            let before = try await Self.round("before", provider: provider, stack)
            _ = try await Self.settled(stack)
            #expect(try await Self.keyFetches(provider, stack) == 1)
            if provider == .apple {
                _ = try await stack.sandbox.admin.rotateKeys(retire: true)
            } else {
                _ = try await stack.sandbox.google.rotateKeys(retire: true)
            }
            let after = try await Self.round("after", provider: provider, stack)
            let requests = try await Self.settled(stack)

            for round in [before, after] {
                for (reference, grantID) in round.revocations {
                    let request = requests.first { $0.externalReference == reference }
                    #expect(request?.outcome == .revoked, "\(reference): \(request?.outcome?.rawValue ?? "-") \(request?.lastErrorCode ?? "")")
                    let revocations =
                        provider == .apple
                        ? try await stack.sandbox.admin.grant(grantID).revocations : try await stack.sandbox.google.grant(grantID).revocations
                    #expect(revocations == 1, "\(reference) revoked exactly once")
                }
                for (id, subject) in round.holds {
                    let grant = try #require(try await stack.queue.custody.grant(id: id))
                    #expect(grant.state == .held, "\(subject): \(grant.state) \(grant.error?.code ?? "")")
                    #expect(grant.userID == subject, "bound to the user its verified identity token names")
                }
            }
            // The cache fetched once at the start and once for the new key (and once more per
            // max-age that ran out between), never once per answer.
            #expect(try await Self.keyFetches(provider, stack) <= 4)
            try await stack.expectNoSecretsInAudit()
        }
    }
}
