import Foundation
import Logging
import RevokerProvider
import RevokerStore
import Tracing

/// What became of one claimed request.
public enum Disposition: Sendable, Equatable {
    /// Its name in spans: `finished`, `retry_scheduled`, ….
    public var name: String {
        switch self {
        case .finished: "finished"
        case .retryScheduled: "retry_scheduled"
        case .paused: "paused"
        case .released: "released"
        case .postponed: "postponed"
        case .leaseLost: "lease_lost"
        case .interrupted: "interrupted"
        }
    }

    /// Final, with this outcome.
    case finished(RevocationOutcome)
    /// Back in the queue after a transient failure, due again after the delay.
    case retryScheduled(Duration)
    /// Back in the queue because its app is paused on a configuration fault.
    case paused
    /// Handed back at shutdown, unfinished.
    case released
    /// Handed back until its app's rate limit has a call slot for it, due again after the delay.
    case postponed(Duration)
    /// Another worker holds the request now (this lease expired); nothing was written.
    case leaseLost
    /// The database failed mid-way; the lease will expire and the request will be rescued.
    case interrupted
}

/// Carries one claimed request through its provider: exchange the code or prove the refresh
/// token, check whose grant it is, revoke, and the outcome with its audit events.
///
/// A code is exchanged once: the refresh token it yields is sealed and stored before the
/// revoke, so a retry validates that token instead of re-sending a burnt code.
public struct RevocationPipeline: Sendable {
    let queue: RevocationQueue
    let providers: SignInProviders
    let retryPolicy: RetryPolicy
    let pauseProbeInterval: Duration
    let pauses: PauseBook
    let databaseTimeout: Duration
    let metrics: WorkerMetrics
    let rateLimits: OutboundRateLimits
    let logger: Logger

    public init(
        queue: RevocationQueue,
        providers: SignInProviders,
        settings: WorkerSettings,
        rateLimits: OutboundRateLimits? = nil,
        metrics: WorkerMetrics = .init(),
        logger: Logger
    ) {
        self.queue = queue
        self.rateLimits = rateLimits ?? OutboundRateLimits(perApp: settings.appRequestsPerSecond, global: settings.maxRequestsPerSecond)
        self.providers = providers
        self.retryPolicy = RetryPolicy(base: settings.retryBase, cap: settings.retryCap)
        self.pauseProbeInterval = settings.pauseProbeInterval
        self.pauses = PauseBook()
        self.databaseTimeout = settings.databaseTimeout
        self.metrics = metrics
        self.logger = logger
    }

    /// Processes one request. `shouldRelease` is asked between steps; when it answers true
    /// (shutdown past its grace period) the request is handed back instead of continued.
    ///
    /// The attempt is a span continuing the trace the request was enqueued in (its stored
    /// `traceparent`), however long it waited, linked to `claim`, the span of its claim batch.
    public func process(
        _ claimed: ClaimedRevocation,
        claim: ServiceContext? = nil,
        shouldRelease: @escaping @Sendable () -> Bool = { false }
    ) async -> Disposition {
        let request = claimed.request
        return await withSpan("revocation attempt", context: request.traceParent?.context ?? .topLevel, ofKind: .consumer) { span in
            // Without a tracer (or unsampled) the span records nothing: nothing is spent on it.
            if span.isRecording {
                if let claim { span.addLink(SpanLink(context: claim, attributes: [:])) }
                span.attributes["revoker.request.id"] = request.id.uuidString.lowercased()
                span.attributes["revoker.provider"] = request.provider
                span.attributes["revoker.client_id"] = request.clientID
                span.attributes["revoker.request.purpose"] = request.purpose.rawValue
                span.attributes["revoker.attempt"] = request.attempts
            }
            let disposition = await attempt(claimed, shouldRelease: shouldRelease)
            if span.isRecording {
                span.attributes["revoker.disposition"] = disposition.name
                if case .finished(let outcome) = disposition { span.attributes["revoker.outcome"] = outcome.rawValue }
            }
            return disposition
        }
    }

    private func attempt(_ claimed: ClaimedRevocation, shouldRelease: @escaping @Sendable () -> Bool) async -> Disposition {
        var logger = self.logger
        // One assignment: a handler may re-render its metadata at each (StreamLogHandler does).
        logger.handler.metadata.merge(
            [
                "revoker.request.id": "\(claimed.request.id)",
                "revoker.provider": "\(claimed.request.provider)",
                "revoker.client_id": "\(claimed.request.clientID)",
            ]
        ) { $1 }
        var claimed = claimed
        if claimed.request.purpose == .hold {
            // A new sign-in is a new consent: what the provider said of the user before does not
            // concern the grant being taken in.
            claimed.userRevocation = nil
        } else if claimed.request.grantID != nil, claimed.userRevocation == .accountDeleted {
            // A held grant's token may not be the user's the message names (a stated user is
            // unproven): it is revoked all the same; a gone account costs one refusal.
            claimed.userRevocation = nil
        }
        var run = Run(claimed: claimed, logger: logger, shouldRelease: shouldRelease)
        do {
            return try await self.carry(&run)
        } catch {
            logger.warning(
                "Database error while processing a request; it will be rescued when its lease expires",
                metadata: ["revoker.error": .string(SafeText.describing(error, limit: 300))]
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
        /// The first call's booked slot, until that call takes it.
        var ticket: OutboundRateLimits.Ticket?
        /// The `sub` of the identity token that came with the grant, once verified.
        var verifiedSubject: String?

        var request: RevocationRequest { claimed.request }

        mutating func takeTicket() -> OutboundRateLimits.Ticket? {
            defer { ticket = nil }
            return ticket
        }
        var lease: Lease { claimed.lease }
    }

    /// The steps of one request: its app, what a gone account leaves, the first call's slot,
    /// then by credential exchange or prove, and the revoke.
    private func carry(_ run: inout Run) async throws -> Disposition {
        guard let provider = ProviderName(rawValue: run.request.provider),
            let app = providers.app(provider: provider, clientID: run.request.clientID)?.forAttempt()
        else { return try await unconfigured(&run) }
        if run.claimed.userRevocation == .accountDeleted { return try await accountGone(provider, &run) }
        if let postponed = try await bookFirstCall(&run) { return postponed }
        let next: Next
        let secret = run.claimed.credential.secret
        switch (run.claimed.credential.kind, run.request.purpose) {
        case (.authorizationCode, _): next = try await exchange(app, provider, &run)
        case (.refreshToken, _): next = try await prove(app, provider, .refreshToken, &run)
        // An access token is proven when taken into custody, and before a revoke that names its
        // user, where its provider can say whose it is; a held grant is revoked whoever it names.
        case (.accessToken, .hold) where app.provesAccessTokens: next = try await prove(app, provider, .accessToken, &run)
        case (.accessToken, .revoke) where app.provesAccessTokens && run.request.userID != nil && run.request.grantID == nil:
            next = try await prove(app, provider, .accessToken, &run)
        case (.accessToken, .revoke): next = .revoke(secret, .accessToken)
        // An identity token that is the grant was verified completely when registered.
        case (.identityToken, .hold): return try await holdVerified(&run)
        case (.identityToken, .revoke): next = .revoke(secret, .identityToken)
        default: return try await unsupportedCredential(&run)
        }
        switch next {
        case .ended(let disposition): return disposition
        case .revoke(let token, let kind):
            if run.shouldRelease() { return try await release(&run) }
            return try await revoke(token, kind, app, provider, &run)
        }
    }

    enum Step {
        case exchange, validate, revoke
    }

    /// Acts on the provider's refusal or a failed call: final, paused, or retried.
    func handle(_ failure: ProviderFailure, latency: Duration?, step: Step, _ run: inout Run) async throws -> Disposition {
        run.events.append(Self.providerError(failure, latency: latency))
        let error = ErrorDetail(code: failure.error ?? failure.classification.rawValue, description: failure.errorDescription ?? failure.detail)
        switch failure.classification {
        case .credentialRejected:
            if run.claimed.userRevocation == .consentRevoked, step == .exchange || step == .validate {
                // A notification told us the user revoked the grant; the refusal confirms it.
                return try await finish(&run, .revokedByUser, error: error)
            }
            switch step {
            case .exchange where run.claimed.exchangeStartedBefore:
                run.logger.warning(
                    "The provider refused a code that an earlier attempt had started exchanging; the grant it yielded, if any, is unknown"
                )
                return try await finish(&run, .exchangeLost, error: error)
            case .exchange: return try await finish(&run, .codeRejected, error: error)
            case .validate, .revoke: return try await finish(&run, .alreadyInvalid, error: error)
            }
        case .requestRejected:
            run.logger.error(
                "The provider refused the request as malformed",
                metadata: ["provider.error": "\(failure.error ?? "-")", "http.status": "\(failure.httpStatus ?? 0)"]
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
            if run.request.attempts >= run.request.maxAttempts, run.request.purpose == .hold, run.claimed.credential.kind != .authorizationCode {
                // Neither proven nor refused: kept in custody all the same (a deletion revokes it),
                // its user unproven, rather than a live token dropped.
                run.events.append(AuditEvent(.note, detail: "retries exhausted before the provider proved the grant; held with its user unproven"))
                return try await hold(&run, token: run.claimed.credential)
            }
            if run.request.attempts >= run.request.maxAttempts {
                run.logger.warning(
                    "Retries exhausted",
                    metadata: ["revoker.attempts": "\(run.request.attempts)", "provider.error": "\(failure.error ?? failure.detail)"]
                )
                return try await finish(&run, .exhausted, error: error)
            }
            let backoff = retryPolicy.delay(afterAttempt: run.request.attempts, retryAfter: failure.retryAfter)
            // A code held for custody dies five minutes after sign-in: retry within its life.
            let delay = run.request.purpose == .hold ? min(backoff, Self.longestHoldRetry) : backoff
            run.logger.debug(
                "Transient failure; retrying later",
                metadata: ["revoker.retry_in_ms": "\(delay.milliseconds)", "provider.detail": "\(failure.detail)"]
            )
            let (lease, events) = (run.lease, run.events)
            guard try await store({ try await queue.retry(lease, after: delay, error: error, events: events) }) else { return .leaseLost }
            return .retryScheduled(delay)
        }
    }

    /// Pauses the app; logs loudly once per pause period.
    func pause(_ clientID: String, failure: ProviderFailure, logger: Logger) async throws {
        if await pauses.markPaused(clientID) {
            logger.error(
                "The provider refused this app's client credentials; pausing the app until a probe succeeds. Check the app's identifiers and key or secret.",
                metadata: ["provider.error": "\(failure.error ?? "-")", "revoker.probe_in_s": "\(pauseProbeInterval.components.seconds)"]
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

    /// The longest wait before retrying a code's exchange for custody.
    static let longestHoldRetry = Duration.seconds(15)

    /// Ends a hold request: the token sealed in its grant.
    func hold(_ run: inout Run, token: Credential) async throws -> Disposition {
        guard let grantID = run.request.grantID else {
            return try await finish(&run, .rejected, error: ErrorDetail(code: "no_grant", description: "a hold request without a grant"))
        }
        let (lease, events, subject) = (run.lease, run.events, run.verifiedSubject)
        let applied = try await store {
            try await queue.custody.hold(lease, grantID: grantID, token: token, verifiedUserID: subject, events: events)
        }
        run.events = []
        return applied ? .finished(.held) : .leaseLost
    }

    func finish(_ run: inout Run, _ outcome: RevocationOutcome, error: ErrorDetail? = nil) async throws -> Disposition {
        let (lease, events) = (run.lease, run.events)
        let applied = try await store { try await queue.finish(lease, state: outcome.state, outcome: outcome, error: error, events: events) }
        run.events = []
        return applied ? .finished(outcome) : .leaseLost
    }

    func release(_ run: inout Run) async throws -> Disposition {
        let (lease, events) = (run.lease, run.events)
        if !events.isEmpty { _ = try await store { try await queue.record(lease, events: events) } }
        run.events = []
        return try await store { try await queue.release(lease) } ? .released : .leaseLost
    }
}
