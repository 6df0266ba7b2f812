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

/// A worker that dies after Apple answered a code exchange, before the refresh token was stored:
/// the retry's exchange is refused, and that refusal must not be reported as Apple's.
@Suite("The code-exchange window")
struct ExchangeWindowTests {
    static let notes = "com.example.notes"

    @Test func aRefusalAfterAnEarlierExchangeStartedEndsExchangeLost() async throws {
        try await RevokerTestStack.with { stack in
            let burnt = try await stack.enqueue(clientID: Self.notes, reference: "burnt", kind: .authorizationCode)
            let untouched = try await stack.enqueue(clientID: Self.notes, reference: "untouched", kind: .authorizationCode)

            // A worker claims both, records the start of one exchange, sends it, and dies.
            let claimed = try await stack.queue.claim(batch: 10, lease: .milliseconds(300), owner: "worker-that-dies")
            #expect(claimed.count == 2 && claimed.allSatisfy { !$0.exchangeStartedBefore })
            let dying = try #require(claimed.first { $0.request.id == burnt.request.id })
            #expect(try await stack.queue.record(dying.lease, events: [AuditEvent(.exchangeStarted)]))
            try await stack.sandbox.withClient { client in
                let app = AppleAppClient(
                    client: client,
                    signer: try await ClientSecretSigner(app: try #require(stack.configuration.settings(AppleSettings.self)?.apps[Self.notes]).apple)
                )
                let response = try await app.exchange(code: burnt.secret, redirectURI: nil)
                stack.secrets.add(response.refreshToken ?? "")
            }
            try await Task.sleep(for: .milliseconds(400))

            _ = try await stack.drain()
            let requests = Dictionary(uniqueKeysWithValues: try await stack.requests().map { ($0.externalReference, $0) })
            #expect(requests["burnt"]?.state == .failed && requests["burnt"]?.outcome == .exchangeLost)
            // Rescued without an exchange having started, the other code is used as usual.
            #expect(requests["untouched"]?.outcome == .revoked)
            #expect(try await stack.sandbox.admin.grant(untouched.grantID).revocations == 1)
            // `revoker status` counts it.
            #expect(try await stack.queue.statistics().byOutcome[.init(state: .failed, outcome: .exchangeLost)] == 1)
            let audit = try await stack.audit().filter { $0.requestID == burnt.request.id }.map(\.event)
            #expect(audit.filter { $0 == "exchange_started" }.count == 2, "\(audit)")
        }
    }
}
