import AppleSignIn
import Crypto
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
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
        if faults.latencyMilliseconds > 0 { try await Task.sleep(for: .milliseconds(faults.latencyMilliseconds)) }
        guard let fault = faults.fault(for: Double.random(in: 0..<1)) else { return nil }
        switch fault {
        case .internalError:
            await state.record(endpoint: endpoint, status: 500, error: nil, grantID: grantID, now: now)
            return Response(
                status: .internalServerError,
                headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(string: "<html><body>Internal Server Error</body></html>"))
            )
        case .unavailable:
            await state.record(endpoint: endpoint, status: 503, error: nil, grantID: grantID, now: now)
            return Response(
                status: .serviceUnavailable,
                headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(string: "<html><body>Service Unavailable</body></html>"))
            )
        case .throttle:
            await state.record(endpoint: endpoint, status: 429, error: nil, grantID: grantID, now: now)
            return Response(status: .tooManyRequests, headers: [.retryAfter: "\(faults.retryAfterSeconds)"])
        case .hang:
            await state.record(endpoint: endpoint, status: 0, error: "hang", grantID: grantID, now: now)
            // Until the client gives up; a shutting-down sandbox stops hanging at once.
            try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(600)) }
            throw HTTPError(.gatewayTimeout)
        case .drop:
            await state.record(endpoint: endpoint, status: 0, error: "drop", grantID: grantID, now: now)
            try await context.channel.close()
            throw HTTPError(.internalServerError)
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
        let call = await state.lookup(clientID: fields["client_id"], credential: credential)
        if let answer = try await injectFault(call.faults, endpoint: endpoint, grantID: call.grantID, now: now, context: context) {
            throw SandboxAnswer(response: answer)
        }
        guard fields["client_id"] != nil, let secret = fields["client_secret"] else {
            throw await rejection("invalid_request", endpoint, call.grantID, now, "client_id or client_secret is missing")
        }
        let problem =
            call.app.map {
                ClientSecretCheck.problem(with: secret, for: $0, now: now, skew: TimeInterval(configuration.clockSkew.components.seconds))
            }
            ?? "client_id is not registered"
        guard let app = call.app, problem == nil else {
            await state.record(endpoint: endpoint, status: 400, error: "invalid_client", grantID: call.grantID, now: now, rejection: problem)
            throw SandboxAnswer(response: Self.appleError("invalid_client"))
        }
        return (app, call.grantID)
    }
}
