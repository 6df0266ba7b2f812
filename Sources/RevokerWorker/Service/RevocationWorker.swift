import Foundation
import Logging
import RevokerProvider
import RevokerStore
import ServiceLifecycle
import Synchronization
import Tracing

/// Takes due requests from PostgreSQL and carries each through its provider, as a long-lived
/// service (`work`) or until nothing is due (`drain`).
///
/// Claims in batches up to the configured concurrency, wakes on LISTEN/NOTIFY with polling
/// as the fallback, extends the leases of in-flight requests, holds a liveness lock so that
/// others rescue its requests within seconds should it die (and rescues theirs, or expired
/// leases), probes paused apps, and survives database restarts by retrying. On graceful
/// shutdown it stops claiming, lets in-flight requests finish within the grace period and
/// hands back the rest.
public struct RevocationWorker: Service {
    /// How long the worker runs.
    public enum Mode: Sendable {
        /// Until shut down.
        case continuous
        /// Until nothing is due, waiting for retries that fall due before the deadline.
        case drain(deadline: ContinuousClock.Instant)
    }

    let queue: RevocationQueue
    let pipeline: RevocationPipeline
    let providers: SignInProviders
    let settings: WorkerSettings
    let mode: Mode
    let owner: String
    let metrics: WorkerMetrics
    let logger: Logger
    let state = WorkerState()
    /// Calls per second to providers, shared with the other live workers.
    public let rateLimits: OutboundRateLimits

    public init(
        queue: RevocationQueue,
        providers: SignInProviders,
        settings: WorkerSettings,
        mode: Mode = .continuous,
        owner: String = RevocationWorker.defaultOwner(),
        metrics: WorkerMetrics = .init(),
        logger: Logger
    ) {
        self.queue = queue
        self.providers = providers
        self.settings = settings
        self.mode = mode
        self.owner = owner
        self.metrics = metrics
        self.logger = logger
        self.rateLimits = OutboundRateLimits(perApp: settings.appRequestsPerSecond, global: settings.maxRequestsPerSecond)
        self.pipeline = RevocationPipeline(
            queue: queue,
            providers: providers,
            settings: settings,
            rateLimits: rateLimits,
            metrics: metrics,
            logger: logger
        )
    }

    /// `host:pid:random`, unique per process; the lease owner and the audit actor.
    public static func defaultOwner() -> String {
        "\(ProcessInfo.processInfo.hostName.prefix(60)):\(ProcessInfo.processInfo.processIdentifier):\(UInt32.random(in: 0...UInt32.max))"
    }

    /// What the worker has done so far.
    public func report() -> WorkerReport { state.report }

    public func run() async throws {
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        logger.info("Worker started", metadata: ["revoker.worker": "\(owner)", "revoker.concurrency": "\(settings.concurrency)"])
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { background in
                background.addTask { await self.every(self.settings.pollInterval) { signal.yield() } }
                background.addTask { await self.holdSession(signal) }
                background.addTask { await self.every(self.settings.lease / 3) { await self.extendLeases() } }
                if case .continuous = mode {
                    // A drain rescues in its claim loop instead, so that its last claim comes after its last rescue.
                    background.addTask { await self.every(self.settings.rescueInterval) { await self.rescue() } }
                }
                background.addTask { await self.every(min(self.settings.pauseProbeInterval, .seconds(5))) { await self.probePausedApps() } }
                background.addTask { await self.every(self.settings.rescueInterval) { await self.shareRateLimits() } }
                if case .continuous = mode, settings.grantValidationInterval != nil {
                    background.addTask {
                        await self.scheduleGrantValidations()
                        await self.every(self.settings.grantValidationPass) { await self.scheduleGrantValidations() }
                    }
                }
                await withDiscardingTaskGroup { work in
                    await self.claimLoop(work: &work, signals: signals, signal: signal)
                }
                background.cancelAll()
            }
            // The session's connection is closed (its lock released); a clean stop also leaves the register.
            let (queue, owner) = (queue, owner)
            if state.report.released > 0 {
                // What it handed back is due now: other workers need not wait for their next poll.
                _ = try? await withDeadline(settings.databaseTimeout) { try await queue.wakeWorkers() }
            }
            if case .drain = mode { await countRemainder() }
            _ = try? await withDeadline(settings.databaseTimeout) { try await queue.unregisterWorker(owner: owner) }
        } onGracefulShutdown: {
            self.state.beginShutdown(grace: self.settings.shutdownGrace)
            signal.yield()
        }
        let report = state.report
        logger.info(
            "Worker stopped",
            metadata: ["revoker.succeeded": "\(report.succeeded)", "revoker.failed": "\(report.failed)", "revoker.released": "\(report.released)"]
        )
    }

    private func claimLoop(work: inout DiscardingTaskGroup, signals: AsyncStream<Void>, signal: AsyncStream<Void>.Continuation) async {
        var wakeUps = signals.makeAsyncIterator()
        var failures = 0
        var nextFanOut = ContinuousClock.now
        // A cron run validates what is due when it starts, and drains those validations too.
        if case .drain = mode { await scheduleGrantValidations() }
        // Cancelled (another part of the process failed, say): stop at once, not at the next request.
        while !state.isStopping, !Task.isCancelled {
            if case .drain(let deadline) = mode, ContinuousClock.now >= deadline {
                state.beginShutdown(grace: .zero, timedOut: true)
                break
            }
            let free = state.mayClaim ? settings.concurrency - state.inFlight : 0
            var claimed: [ClaimedRevocation] = []
            // The batch's span, which its attempts link to: recorded only when it claimed something,
            // so that an idle worker's polls make no spans.
            var claim: ServiceContext?
            // Taken before the claim: a request that ends after it may have made work the claim missed.
            let endingsBeforeClaim = state.endings
            // Large deletions' next batch, while there is more to make; else once a poll interval,
            // so that a busy claim loop does not pay a query for nothing at every turn.
            await handBackUntracked()
            if free > 0, ContinuousClock.now >= nextFanOut {
                nextFanOut = await fanOutDeletions() > 0 ? .now : .now + settings.pollInterval
            }
            if free > 0 {
                do {
                    let (batch, lease, owner, queue) = (min(free, settings.batchSize), settings.lease, owner, queue)
                    let whileLive = state.claimsWhileLive
                    let started = DefaultTracerClock.now
                    claimed = try await withDeadline(settings.databaseTimeout) {
                        try await queue.claim(batch: batch, lease: lease, owner: owner, whileLive: whileLive)
                    }
                    if !claimed.isEmpty {
                        claim = withSpan("claim batch", at: started, ofKind: .internal) { span in
                            span.attributes["revoker.claim.limit"] = batch
                            span.attributes["revoker.claim.claimed"] = claimed.count
                            return span.context
                        }
                    }
                    if failures > 0 { logger.notice("Database reachable again") }
                    failures = 0
                } catch let error as RevokerStoreError where error.code == .livenessLost {
                    logger.warning("The worker's liveness lock is gone where it claims; taking it again before claiming more")
                    state.lostLiveness()
                    continue
                } catch {
                    // The claim may have committed with its answer lost.
                    state.markLostTrack()
                    failures += 1
                    if failures == 1 {
                        logger.warning(
                            "Cannot claim requests; retrying",
                            metadata: ["revoker.error": .string(SafeText.describing(error, limit: 300))]
                        )
                    }
                    try? await Task.sleep(for: min(.milliseconds(200 * (1 << min(failures, 5))), .seconds(5)))
                    continue
                }
            }
            let batchSpan = claim
            for item in claimed {
                state.started(item.lease)
                metrics.attemptStarted(provider: item.request.provider, clientID: item.request.clientID)
                metrics.inFlight(state.inFlight)
                work.addTask {
                    let disposition = await self.pipeline.process(item, claim: batchSpan) { self.state.mustRelease || self.state.livenessLost }
                    self.state.ended(item.lease, disposition, leaseDuration: self.settings.lease)
                    self.record(disposition, of: item.request)
                    signal.yield()
                }
            }
            if claimed.count == min(free, settings.batchSize), free > 0 { continue }
            if case .drain(let deadline) = mode, state.inFlight == 0, state.mayClaim, state.endings == endingsBeforeClaim {
                // A cron run has no long-lived loops to rely on: it rescues dead workers' requests,
                // probes paused apps and fans out deletions itself before deciding that nothing is left.
                let rescue = await rescue()
                if rescue.rescued + (await probePausedApps()) + (await fanOutDeletions()) > 0 { continue }
                if rescue.awaitingConfirmation > 0 {
                    // A dead worker's requests come back once its lock has stayed free long enough.
                    try? await Task.sleep(for: settings.rescueInterval)
                    continue
                }
                if state.isDrained(deadline: deadline, patience: settings.pollInterval + .seconds(5)) { break }
            }
            _ = await wakeUps.next()
        }
    }

    /// Hands back the requests leased to this worker that it does not carry, once a claim or a
    /// write was cut off (``WorkerState/markLostTrack()``): run by the claim loop, between its
    /// claims, so that nothing it claims is missed from what it carries. A failure leaves it to
    /// the next turn.
    private func handBackUntracked() async {
        guard state.takeLostTrack() else { return }
        let (queue, owner, keeping) = (queue, owner, state.leases.map(\.requestID))
        do {
            _ = try await withDeadline(settings.databaseTimeout) { try await queue.handBackUntracked(owner: owner, keeping: keeping) }
        } catch {
            state.markLostTrack()
        }
    }

    /// Makes the next batch of revocation requests for large deletions, ahead of the claim that
    /// takes them; a failure is left to the next turn of the loop.
    /// Returns how many requests it made.
    private func fanOutDeletions() async -> Int {
        let (queue, owner) = (queue, owner)
        do {
            let made = try await withDeadline(settings.databaseTimeout) { try await queue.deletions.fanOut(actor: owner) }
            if made > 0 { logger.debug("Asked for the revocation of a deletion's grants", metadata: ["revoker.requests": "\(made)"]) }
            return made
        } catch {
            logger.warning("Cannot fan out deletions", metadata: ["revoker.error": .string(SafeText.describing(error))])
            return 0
        }
    }

    /// Schedules the validations of held grants that are due (``WorkerSettings/grantValidationInterval``).
    private func scheduleGrantValidations() async {
        guard let every = settings.grantValidationInterval else { return }
        let (queue, owner, limit) = (queue, owner, settings.grantValidationBatch)
        do {
            let scheduled = try await withDeadline(settings.databaseTimeout) {
                try await queue.custody.scheduleValidations(every: every, limit: limit, actor: owner)
            }
            if scheduled > 0 { logger.debug("Scheduled validations of held grants", metadata: ["revoker.scheduled": "\(scheduled)"]) }
        } catch {
            logger.warning("Cannot schedule validations of held grants", metadata: ["revoker.error": .string(SafeText.describing(error))])
        }
    }

    /// Counts what a drain leaves in the queue: an app paused by an earlier run, with its probe
    /// not yet due, leaves requests waiting that this process never claimed.
    private func countRemainder() async {
        let queue = queue
        do {
            let remainder = try await withDeadline(settings.databaseTimeout) { try await queue.remainder() }
            state.ended(leaving: remainder)
        } catch {
            logger.warning("Cannot count the requests left waiting", metadata: ["revoker.error": .string(SafeText.describing(error))])
        }
    }

    private func record(_ disposition: Disposition, of request: RevocationRequest) {
        let (provider, clientID) = (request.provider, request.clientID)
        switch disposition {
        case .finished(let outcome): metrics.finished(outcome, provider: provider, clientID: clientID)
        case .retryScheduled: metrics.retryScheduled(reason: "transient", provider: provider, clientID: clientID)
        case .paused: metrics.retryScheduled(reason: "paused", provider: provider, clientID: clientID)
        case .postponed: metrics.retryScheduled(reason: "rate_limit", provider: provider, clientID: clientID)
        case .released, .leaseLost, .interrupted: break
        }
        metrics.inFlight(state.inFlight)
    }

    /// Runs `body` every `interval` until cancelled.
    private func every(_ interval: Duration, _ body: @Sendable () async -> Void) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            await body()
        }
    }

    /// How often a worker the database refused its liveness lock asks again (its role may have
    /// been granted what it lacked).
    static let livenessRetryAfterRefusal: Duration = .seconds(60)

    /// How long the session waits for the rate limits' share before it hears wake-ups.
    static let sessionStepTimeout: Duration = .seconds(5)

    /// Holds the worker's liveness lock on a connection of its own, which also wakes the claim
    /// loop on NOTIFY; takes it again after the database went away (a failover: the new primary
    /// holds no lock of the old one's sessions). Should the database refuse the lock for good,
    /// the worker goes on with wake-ups alone, its requests relying on their leases, and asks
    /// again every ``livenessRetryAfterRefusal``.
    private func holdSession(_ signal: AsyncStream<Void>.Continuation) async {
        let (queue, owner, state) = (queue, owner, state)
        let sealing = SingleFlight()
        let (timeout, logger) = (settings.databaseTimeout, logger)
        // The session's body only hears: database work of its own here (on the pool, whose
        // connections may hang in a failover) would keep the session from ending with its
        // connection, and the worker would think it held a lock the server no longer has.
        let hear: @Sendable (WakeUps) async throws -> Void = { wakeUps in
            // Registered: learn how many workers share the rate limits before the first claim.
            await self.shareRateLimits(within: Self.sessionStepTimeout)
            signal.yield()
            for try await _ in wakeUps {
                // Claim first (the claim seals what it takes): sealing the rest must not delay pickup.
                signal.yield()
                sealing.run {
                    do {
                        if try await withDeadline(timeout, { try await queue.sealIntake() }) > 0 { signal.yield() }
                    } catch {
                        logger.debug("Cannot seal the SQL intake yet", metadata: ["revoker.error": .string(SafeText.describing(error))])
                    }
                }
            }
        }
        var refused = false
        while !Task.isCancelled {
            do {
                if refused {
                    // Wake-ups alone, until it is time to ask for the lock again.
                    let retry = Self.livenessRetryAfterRefusal
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await queue.withWakeUps(hear) }
                        group.addTask { try await Task.sleep(for: retry) }
                        try await group.next()
                        group.cancelAll()
                    }
                    refused = false
                    continue
                }
                try await queue.withWorkerSession(owner: owner, opened: { state.opened($0) }, registered: { state.setLiveness(.held) }, hear)
            } catch let error as RevokerStoreError where error.code == .livenessUnavailable {
                if !refused, state.setLiveness(.unavailable) != .unavailable {
                    logger.warning(
                        "The database refuses the worker's liveness lock; should this worker die, its requests wait for their leases (grant migration 0011's table to the worker's role: deploy/postgres/roles.sql)",
                        metadata: ["revoker.error": "\(String(reflecting: error).prefix(300))"]
                    )
                }
                refused = true
                continue
            } catch {
                if Task.isCancelled { return }
                if !refused, state.setLiveness(.lost) == .held {
                    logger.warning(
                        "The worker's own database connection dropped; handing back in-flight requests until it is back",
                        metadata: ["revoker.error": .string(SafeText.describing(error))]
                    )
                } else {
                    // Each try while the database is away or read-only (a standby being promoted).
                    logger.debug(
                        "Cannot take the worker's liveness lock yet; trying again",
                        metadata: ["revoker.error": "\(String(reflecting: error).prefix(300))"]
                    )
                }
            }
            do { try await Task.sleep(for: .seconds(1)) } catch { return }
        }
    }

    /// Publishes the calls per second this worker made to each app (for `revoker status`) and
    /// shares the rate limits among the live workers.
    private func shareRateLimits(within timeout: Duration? = nil) async {
        let (queue, owner, observed) = (queue, owner, rateLimits.observed())
        metrics.rates(configured: rateLimits.configured, observed: observed)
        do {
            let live = try await withDeadline(timeout ?? settings.databaseTimeout) { try await queue.reportCallRates(owner: owner, rates: observed) }
            rateLimits.share(among: live)
        } catch {
            logger.debug("Cannot publish call rates", metadata: ["revoker.error": .string(SafeText.describing(error))])
        }
    }

    /// Extends every in-flight lease, in one statement.
    private func extendLeases() async {
        let (queue, duration, leases) = (queue, settings.lease, state.leases)
        guard !leases.isEmpty else { return }
        _ = try? await withDeadline(settings.databaseTimeout) { try await queue.extendLeases(leases, by: duration) }
    }

    /// Puts the requests of workers that are gone (lease expired, or liveness lock free) back in the queue.
    @discardableResult
    private func rescue() async -> RescueResult {
        do {
            let queue = queue
            return try await withDeadline(settings.databaseTimeout) { try await queue.rescue() }
        } catch {
            logger.debug("Rescue pass failed", metadata: ["revoker.error": .string(SafeText.describing(error))])
            return RescueResult(rescued: 0, awaitingConfirmation: 0)
        }
    }

    /// Probes each paused app that is due a probe (``ProviderApp/probe()``: a call that touches
    /// no grant and tells whether the provider accepts the app's credentials).
    /// Returns how many apps were resumed.
    @discardableResult
    private func probePausedApps() async -> Int {
        let queue = queue
        guard let pauses = try? await withDeadline(settings.databaseTimeout, { try await queue.pausedApps() }) else { return 0 }
        let now = Date()
        var resumed = 0
        for pause in pauses where pause.nextProbeAt <= now {
            guard let app = providers.app(clientID: pause.clientID) else { continue }
            do {
                try await app.probe()
                if try await queue.resumeApp(clientID: pause.clientID) {
                    resumed += 1
                    await pipeline.resumed(pause.clientID)
                    logger.notice("The provider accepts the app's credentials again; resumed", metadata: ["revoker.client_id": "\(pause.clientID)"])
                }
            } catch let failure as ProviderFailure where failure.classification == .configurationFault {
                try? await pipeline.pause(pause.clientID, failure: failure, logger: logger)
            } catch {
                logger.debug("Probe of a paused app failed transiently", metadata: ["revoker.client_id": "\(pause.clientID)"])
            }
        }
        return resumed
    }
}

/// Runs one piece of work at a time; a call while one runs asks for one more run after it
/// (what it would have done is then done by that run).
final class SingleFlight: Sendable {
    private let state = Mutex((running: false, again: false))

    func run(_ work: @escaping @Sendable () async -> Void) {
        let start = state.withLock { state in
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        guard start else { return }
        Task {
            while true {
                await work()
                let more = state.withLock { state in
                    if state.again {
                        state.again = false
                        return true
                    }
                    state.running = false
                    return false
                }
                if !more { return }
            }
        }
    }
}
