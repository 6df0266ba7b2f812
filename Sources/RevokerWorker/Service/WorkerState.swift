import Foundation
import Logging
import RevokerStore
import ServiceLifecycle
import Synchronization

/// The worker's shared state: in-flight leases, retries to wait for, shutdown, the report.
final class WorkerState: Sendable {
    private struct Shutdown {
        var stopping = false
        var releaseAfter: ContinuousClock.Instant?
        var timedOut = false
    }

    private struct Work {
        var leases: [UUID: Lease] = [:]
        var report = WorkerReport()
        /// Retries this worker scheduled and when they fall due (`drain` waits for them).
        var retriesDue: [UUID: ContinuousClock.Instant] = [:]
        /// Requests whose last disposition here left them unfinished.
        var unfinished: Set<UUID> = []
        var remainder: QueueRemainder?
        /// How many requests this worker has ended: what ends may have made more work.
        var endings = 0
    }

    /// The worker's liveness lock (`RevocationQueue.withWorkerSession`).
    enum Liveness {
        /// Not taken yet.
        case starting
        /// Held and registered: requests claimed now are rescued within seconds should this process die.
        case held
        /// Its connection dropped: others may soon take this worker for dead.
        case lost
        /// The database refuses it: requests rely on their leases alone.
        case unavailable
    }

    private let shutdown = Mutex(Shutdown())
    private let work = Mutex(Work())
    private let liveness = Mutex(Liveness.starting)
    private let lostTrack = Mutex(false)

    /// A claim or a write was cut off by the database: it may hold running requests leased to
    /// this worker that the worker does not carry (``takeLostTrack()`` says so once).
    func markLostTrack() { lostTrack.withLock { $0 = true } }

    /// Whether the worker may have lost track of requests since it last asked; clears it.
    func takeLostTrack() -> Bool {
        lostTrack.withLock { lost in
            defer { lost = false }
            return lost
        }
    }

    /// New requests may be claimed: never while the liveness lock is being taken or was lost,
    /// since a rescuer could take this worker for dead and run the same request.
    var mayClaim: Bool { liveness.withLock { $0 == .held || $0 == .unavailable } }

    /// Whether claims must find the liveness lock held where they run (not when the database refuses it).
    var claimsWhileLive: Bool { liveness.withLock { $0 == .held } }

    /// The worker's current session, which a claim that finds the lock gone ends.
    private let session = Mutex<WorkerSession?>(nil)

    func opened(_ new: WorkerSession) { session.withLock { $0 = new } }

    /// The lock is gone where the worker claims: its session died unnoticed. Ends that session
    /// (the worker takes the lock again) and hands back what is in flight meanwhile.
    func lostLiveness() {
        guard setLiveness(.lost) == .held else { return }
        session.withLock { $0 }?.end()
    }

    /// In-flight requests should be handed back before their next step: the liveness lock is lost.
    var livenessLost: Bool { liveness.withLock { $0 == .lost } }

    /// Records the lock's state; returns the previous one.
    @discardableResult
    func setLiveness(_ new: Liveness) -> Liveness {
        liveness.withLock { state in
            let old = state
            state = new
            return old
        }
    }

    /// Claiming has stopped.
    var isStopping: Bool { shutdown.withLock { $0.stopping } }

    /// In-flight requests should be handed back: shutdown began and its grace period is over.
    var mustRelease: Bool {
        shutdown.withLock { state in state.releaseAfter.map { ContinuousClock.now >= $0 } ?? false }
    }

    func beginShutdown(grace: Duration, timedOut: Bool = false) {
        shutdown.withLock { state in
            if !state.stopping { state.releaseAfter = .now + grace }
            state.stopping = true
            state.timedOut = state.timedOut || timedOut
        }
    }

    var inFlight: Int { work.withLock { $0.leases.count } }

    /// How many requests this worker has ended so far; a drain that sees it move since its last
    /// claim asks again before it ends (a grant held there may have made its revocation).
    var endings: Int { work.withLock { $0.endings } }
    var leases: [Lease] { work.withLock { Array($0.leases.values) } }

    var report: WorkerReport {
        var report = work.withLock { state in
            var report = state.report
            report.unfinished = state.unfinished.count
            report.remainder = state.remainder
            return report
        }
        report.timedOut = shutdown.withLock { $0.timedOut }
        return report
    }

    /// Records what the queue held at the end of a drain.
    func ended(leaving remainder: QueueRemainder) {
        work.withLock { $0.remainder = remainder }
    }

    func started(_ lease: Lease) {
        work.withLock { state in
            state.leases[lease.requestID] = lease
            state.retriesDue[lease.requestID] = nil
        }
    }

    func ended(_ lease: Lease, _ disposition: Disposition, leaseDuration: Duration) {
        if case .interrupted = disposition { markLostTrack() }
        work.withLock { state in
            state.leases[lease.requestID] = nil
            state.endings += 1
            state.report.add(disposition)
            if case .finished = disposition {
                state.unfinished.remove(lease.requestID)
            } else {
                state.unfinished.insert(lease.requestID)
            }
            switch disposition {
            case .retryScheduled(let delay), .postponed(let delay):
                state.retriesDue[lease.requestID] = .now + delay
            case .interrupted:
                // The database failed mid-way: the worker hands the request back once it answers
                // again, or it comes back when its lease expires.
                state.retriesDue[lease.requestID] = .now + leaseDuration
            default:
                break
            }
        }
    }

    /// Nothing in flight, and no retry this worker scheduled falls due before `deadline`.
    /// A retry that is overdue by `patience` was taken by another worker (or its app paused): it is forgotten.
    func isDrained(deadline: ContinuousClock.Instant, patience: Duration) -> Bool {
        work.withLock { state in
            let now = ContinuousClock.now
            state.retriesDue = state.retriesDue.filter { $0.value + patience > now }
            return state.leases.isEmpty && !state.retriesDue.values.contains { $0 < deadline }
        }
    }
}
