import AppleSignIn
import Foundation
import Logging
import RevokerStore

/// What became of one claimed request.
public enum Disposition: Sendable, Equatable {
    /// Final, with this outcome.
    case finished(RevocationOutcome)
    /// Back in the queue after a transient failure, due again after the delay.
    case retryScheduled(Duration)
    /// Back in the queue because its app is paused on a configuration fault.
    case paused
    /// Handed back at shutdown, unfinished.
    case released
    /// Another worker holds the request now (this lease expired); nothing was written.
    case leaseLost
    /// The database failed mid-way; the lease will expire and the request will be rescued.
    case interrupted
}

/// Carries one claimed request through Apple: fresh client secret, exchange or validate,
/// identity check, revoke, and the outcome with its audit events.
///
/// A code is exchanged once: the refresh token it yields is sealed and stored before the
/// revoke, so a retry validates that token instead of re-sending a burnt code.
public struct RevocationPipeline: Sendable {
    let queue: RevocationQueue
    let apps: AppleApps
    let retryPolicy: RetryPolicy
    let pauseProbeInterval: Duration
    let pauses: PauseBook
    let databaseTimeout: Duration
    let metrics: WorkerMetrics
    let logger: Logger

    public init(queue: RevocationQueue, apps: AppleApps, settings: WorkerSettings, metrics: WorkerMetrics = .init(), logger: Logger) {
        self.queue = queue
        self.apps = apps
        self.retryPolicy = RetryPolicy(base: settings.retryBase, cap: settings.retryCap)
        self.pauseProbeInterval = settings.pauseProbeInterval
        self.pauses = PauseBook()
        self.databaseTimeout = settings.databaseTimeout
        self.metrics = metrics
        self.logger = logger
    }

    /// Processes one request. `shouldRelease` is asked between steps; when it answers true
    /// (shutdown past its grace period) the request is handed back instead of continued.
    public func process(_ claimed: ClaimedRevocation, shouldRelease: @escaping @Sendable () -> Bool = { false }) async -> Disposition {
        var logger = self.logger
        logger[metadataKey: "revoker.request.id"] = "\(claimed.request.id)"
        logger[metadataKey: "apple.client_id"] = "\(claimed.request.clientID)"
        var run = Run(claimed: claimed, logger: logger, shouldRelease: shouldRelease)
        do {
            return try await self.carry(&run)
        } catch {
            logger.warning(
                "Database error while processing a request; it will be rescued when its lease expires",
                metadata: ["error": "\(String(describing: error).prefix(300))"]
            )
            return .interrupted
        }
    }

    /// The state of one run: the lease, the events not yet written, and the clock.
    struct Run {
        let claimed: ClaimedRevocation
        let logger: Logger
        let shouldRelease: @Sendable () -> Bool
        var events: [AuditEvent] = []

        var request: RevocationRequest { claimed.request }
        var lease: Lease { claimed.lease }
    }

    private func carry(_ run: inout Run) async throws -> Disposition {
        guard let app = apps[run.request.clientID] else {
            run.logger.error(
                "A request names a client_id this worker has no configuration for; it fails as client_misconfigured and can be requeued once the app is configured"
            )
            return try await finish(
                &run,
                .clientMisconfigured,
                error: ErrorDetail(code: "unknown_client_id", description: "no configuration for this client_id")
            )
        }
        if run.claimed.userRevocation == .accountDeleted {
            // The Apple account is gone, and every grant with it: nothing to call Apple about.
            run.events.append(AuditEvent(.note, detail: "Apple reported that the user deleted their Apple account; no grant is left"))
            return try await finish(&run, .revokedByUser)
        }
        var token = run.claimed.credential.secret
        var hint = TokenTypeHint.refreshToken

        switch run.claimed.credential.kind {
        case .authorizationCode:
            let redirectURI = run.request.redirectURI ?? app.defaultRedirectURI
            // Recorded before the call: should this attempt die before the refresh token is
            // stored, the next one knows that a refusal of the code may be our own doing.
            let (lease, started) = (run.lease, run.events + [AuditEvent(.exchangeStarted, appleEndpoint: AppleEndpoint.token.rawValue)])
            guard try await store({ try await queue.record(lease, events: started) }) else { return .leaseLost }
            run.events = []
            let response: AppleTokenResponse
            switch await call(.token, { try await app.client.exchange(code: token, redirectURI: redirectURI) }) {
            case .failure(let failure, let latency): return try await handle(failure, latency: latency, step: .exchange, &run)
            case .success(let answer, let latency):
                response = answer
                run.events.append(AuditEvent(.tokenExchanged, appleEndpoint: AppleEndpoint.token.rawValue, httpStatus: 200, latency: latency))
            }
            if let refused = try await checkIdentity(response, app: app, &run) { return refused }
            if let refreshToken = response.refreshToken {
                // Stored before the revoke: a retry must never re-send the burnt code.
                let (lease, events) = (run.lease, run.events)
                let stored = try await store {
                    try await queue.replaceCredential(lease, with: Credential(kind: .refreshToken, secret: refreshToken), events: events)
                }
                run.events = []
                guard stored else {
                    // Another worker took the request over; it holds only the burnt code, so revoke what we got.
                    _ = try? await app.client.revoke(token: refreshToken, hint: .refreshToken)
                    run.logger.warning("Lease lost after exchanging a code; revoked the new refresh token without recording it")
                    return .leaseLost
                }
                token = refreshToken
            } else {
                token = response.accessToken
                hint = .accessToken
            }
        case .refreshToken:
            switch await call(.token, { try await app.client.validate(refreshToken: token) }) {
            case .failure(let failure, let latency): return try await handle(failure, latency: latency, step: .validate, &run)
            case .success(let response, let latency):
                run.events.append(AuditEvent(.tokenValidated, appleEndpoint: AppleEndpoint.token.rawValue, httpStatus: 200, latency: latency))
                if let refused = try await checkIdentity(response, app: app, &run) { return refused }
            }
        case .accessToken:
            hint = .accessToken
        default:
            return try await finish(
                &run,
                .rejected,
                error: ErrorDetail(code: "unknown_credential_kind", description: "the credential kind is not supported")
            )
        }

        if run.shouldRelease() { return try await release(&run) }
        switch await call(.revoke, { try await app.client.revoke(token: token, hint: hint) }) {
        case .failure(let failure, let latency): return try await handle(failure, latency: latency, step: .revoke, &run)
        case .success(_, let latency):
            run.events.append(
                AuditEvent(
                    .revoked,
                    appleEndpoint: AppleEndpoint.revoke.rawValue,
                    httpStatus: 200,
                    latency: latency,
                    detail: "token_type_hint=\(hint.rawValue)"
                )
            )
            return try await finish(&run, .revoked)
        }
    }

    /// Verifies the identity token and, when the request names an Apple user, refuses a grant of anyone else.
    /// Returns a disposition when the request ends here.
    private func checkIdentity(_ response: AppleTokenResponse, app: AppleApps.Entry, _ run: inout Run) async throws -> Disposition? {
        let expected = run.request.appleUserID
        guard let idToken = response.idToken else {
            guard expected != nil else { return nil }
            return try await finish(
                &run,
                .rejected,
                error: ErrorDetail(code: "id_token_missing", description: "Apple sent no identity token to check the user against")
            )
        }
        let subject: String
        do {
            subject = try await apps.verifier.verify(idToken, clientID: app.client.clientID).appleUserID
        } catch let failure as AppleAPIError {
            return try await handle(failure, latency: nil, step: .keys, &run)
        } catch {
            let code = (error as? AppleSignInError)?.code.description ?? "id_token_invalid"
            guard expected != nil else {
                run.events.append(AuditEvent(.note, detail: "identity token not verified (\(code)); no Apple user id to check"))
                return nil
            }
            return try await finish(&run, .rejected, error: ErrorDetail(code: code, description: "the identity token could not be verified"))
        }
        if let expected, subject != expected {
            run.events.append(AuditEvent(.idTokenMismatch, detail: "the grant belongs to another Apple user than the request names"))
            run.logger.warning("The grant belongs to another Apple user than the request names; not revoking")
            return try await finish(
                &run,
                .subjectMismatch,
                error: ErrorDetail(code: "subject_mismatch", description: "the identity token's sub differs from the request's Apple user id")
            )
        }
        run.events.append(AuditEvent(.idTokenVerified, detail: expected == nil ? "sub not compared (none given)" : "sub matches"))
        return nil
    }

    enum Step {
        case exchange, validate, keys, revoke
    }

    /// Acts on Apple's refusal or a failed call: final, paused, or retried.
    private func handle(_ failure: AppleAPIError, latency: Duration?, step: Step, _ run: inout Run) async throws -> Disposition {
        run.events.append(
            AuditEvent(
                .appleError,
                appleEndpoint: failure.endpoint.rawValue,
                httpStatus: failure.httpStatus,
                appleError: failure.error,
                appleErrorDescription: failure.errorDescription,
                latency: latency,
                detail: failure.detail
            )
        )
        let error = ErrorDetail(code: failure.error ?? failure.classification.rawValue, description: failure.errorDescription ?? failure.detail)
        switch failure.classification {
        case .credentialRejected:
            if run.claimed.userRevocation == .consentRevoked, step == .exchange || step == .validate {
                // Apple told us the user revoked the grant; the refusal confirms it.
                return try await finish(&run, .revokedByUser, error: error)
            }
            switch step {
            case .exchange where run.claimed.exchangeStartedBefore:
                run.logger.warning(
                    "Apple refused a code that an earlier attempt had started exchanging; the grant it yielded, if any, is unknown"
                )
                return try await finish(&run, .exchangeLost, error: error)
            case .exchange: return try await finish(&run, .codeRejected, error: error)
            case .validate, .revoke, .keys: return try await finish(&run, .alreadyInvalid, error: error)
            }
        case .requestRejected:
            run.logger.error(
                "Apple refused the request as malformed",
                metadata: ["apple.error": "\(failure.error ?? "-")", "http.status": "\(failure.httpStatus ?? 0)"]
            )
            return try await finish(&run, .rejected, error: error)
        case .configurationFault:
            try await pause(run.request.clientID, failure: failure, logger: run.logger)
            let (lease, events, probe) = (run.lease, run.events, pauseProbeInterval)
            guard try await store({ try await queue.retry(lease, after: probe, error: error, countsAttempt: false, events: events) }) else {
                return .leaseLost
            }
            return .paused
        case .transient:
            if run.request.attempts >= run.request.maxAttempts {
                run.logger.warning(
                    "Retries exhausted",
                    metadata: ["revoker.attempts": "\(run.request.attempts)", "apple.error": "\(failure.error ?? failure.detail)"]
                )
                return try await finish(&run, .exhausted, error: error)
            }
            let delay = retryPolicy.delay(afterAttempt: run.request.attempts, retryAfter: failure.retryAfter)
            run.logger.debug(
                "Transient failure; retrying later",
                metadata: ["revoker.retry_in_ms": "\(delay.milliseconds)", "apple.detail": "\(failure.detail)"]
            )
            let (lease, events) = (run.lease, run.events)
            guard try await store({ try await queue.retry(lease, after: delay, error: error, events: events) }) else { return .leaseLost }
            return .retryScheduled(delay)
        }
    }

    /// Pauses the app; logs loudly once per pause period.
    func pause(_ clientID: String, failure: AppleAPIError, logger: Logger) async throws {
        if await pauses.markPaused(clientID) {
            logger.error(
                "Apple refused this app's client credentials; pausing the app until a probe succeeds. Check its Team ID, Key ID, .p8 key and client_id.",
                metadata: ["apple.error": "\(failure.error ?? "-")", "revoker.probe_in_s": "\(pauseProbeInterval.components.seconds)"]
            )
        }
        let (reason, probe) = (
            ErrorDetail(code: failure.error ?? "configuration_fault", description: failure.errorDescription), pauseProbeInterval
        )
        try await store { try await queue.pauseApp(clientID: clientID, reason: reason, probeAfter: probe) }
    }

    /// Records that the app works again.
    func resumed(_ clientID: String) async {
        await pauses.markResumed(clientID)
    }

    private func finish(_ run: inout Run, _ outcome: RevocationOutcome, error: ErrorDetail? = nil) async throws -> Disposition {
        let (lease, events) = (run.lease, run.events)
        let applied = try await store { try await queue.finish(lease, state: outcome.state, outcome: outcome, error: error, events: events) }
        run.events = []
        return applied ? .finished(outcome) : .leaseLost
    }

    private func release(_ run: inout Run) async throws -> Disposition {
        let (lease, events) = (run.lease, run.events)
        if !events.isEmpty { _ = try await store { try await queue.record(lease, events: events) } }
        run.events = []
        return try await store { try await queue.release(lease) } ? .released : .leaseLost
    }
}
