import AppleSignIn
import Crypto
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ProviderSandbox
import ServiceLifecycle

/// What stands between a call and its answer: injected faults, and the client secret check.
extension AppleSandbox {
    /// Applies the configured latency and maybe a fault. Returns the answer to send instead of the real one.
    func injectFault(
        _ faults: SandboxFaults,
        endpoint: String,
        grantID: String?,
        now: Date,
        context: SandboxRequestContext
    ) async throws -> Response? {
        try await faults.inject(context: context) { status, error in
            await state.record(endpoint: endpoint, status: status, error: error, grantID: grantID, now: now)
        }
    }

    /// Everything before the real work: faults, client authentication. Returns the app, or the answer to send.
    func admit(
        _ fields: [String: String],
        endpoint: String,
        credential: String?,
        now: Date,
        context: SandboxRequestContext
    ) async throws -> (app: SandboxState.App, grantID: String?) {
        let digest = fields["client_secret"].map { SHA256.hash(data: Data($0.utf8)) }
        let call = await state.lookup(clientID: fields["client_id"], credential: credential, secret: digest)
        if let answer = try await injectFault(call.faults, endpoint: endpoint, grantID: call.grantID, now: now, context: context) {
            throw SandboxAnswer(response: answer)
        }
        guard fields["client_id"] != nil, let secret = fields["client_secret"] else {
            throw await rejection("invalid_request", endpoint, call.grantID, now, "client_id or client_secret is missing")
        }
        // Apple says no more than invalid_client; the reason goes to the statistics.
        func refuse(_ reason: String) async -> SandboxAnswer {
            await state.record(endpoint: endpoint, status: 400, error: "invalid_client", grantID: call.grantID, now: now, rejection: reason)
            return SandboxAnswer(response: Self.providerError("invalid_client"))
        }
        guard let app = call.app, let digest else { throw await refuse("client_id is not registered") }
        // A secret seen before is not verified again (its signature cannot have changed); its times are.
        let seen = call.verified.flatMap { $0.belongs(to: app) ? $0 : nil }
        let skew = TimeInterval(configuration.clockSkew.components.seconds)
        switch (seen.map { .success($0) } ?? ClientSecretCheck.verify(secret, for: app)).flatMap({
            ClientSecretCheck.current($0, now: now, skew: skew)
        }) {
        case .failure(let problem):
            throw await refuse(problem.reason)
        case .success(let verified):
            if seen == nil { await state.accepted(digest, verified) }
        }
        return (app, call.grantID)
    }
}
