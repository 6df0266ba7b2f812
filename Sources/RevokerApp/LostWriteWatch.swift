import Foundation
import Logging
import RevokerStore
import ServiceLifecycle

/// Notices a failover that lost acknowledged writes. A promoted standby (or a restored backup)
/// runs on a new timeline; asynchronous replication may have left it without the newest commits.
/// Every interval this reads the primary's timeline; when it changes, it looks for every write
/// this process acknowledged in the last ten minutes (``AcknowledgedWrites``) and records each
/// one missing: an error log naming it, a `write_lost` audit row and a `database.write_lost`
/// event for its app's backend (which knows what to send again), counted by `revoker status`
/// and `revoker_writes_lost`.
struct LostWriteWatch: Service {
    let queue: RevocationQueue
    let interval: Duration
    let actor: String
    let logger: Logger
    /// How the timeline is read (tests make one change).
    var timeline: @Sendable () async throws -> UInt32?

    init(queue: RevocationQueue, interval: Duration = .seconds(5), actor: String, logger: Logger) {
        self.queue = queue
        self.interval = interval
        self.actor = actor
        self.logger = logger
        self.timeline = { try await queue.databaseTimeline() }
    }

    /// The last timeline the writes were checked on, and a change not yet checked.
    struct State: Sendable {
        var checked: UInt32?
        var unchecked: (from: UInt32, to: UInt32)?
        var overflowReported = 0
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var state = State()
            while !Task.isCancelled {
                await check(&state)
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    break
                }
            }
        }
    }

    func check(_ state: inout State) async {
        let read = timeline
        // A standby (nil) or a database out of reach: the next interval reads again.
        guard let current = try? await withDeadline(.seconds(10), { try await read() }) else { return }
        guard let checked = state.checked else {
            state.checked = current
            return
        }
        if current != checked { state.unchecked = (state.unchecked?.from ?? checked, current) }
        guard let change = state.unchecked else { return }
        let (writes, overflowed) = queue.acknowledged.kept()
        do {
            let queue = self.queue
            let lost = try await withDeadline(.seconds(60)) { try await queue.missing(writes) }
            if !lost.isEmpty {
                try await withDeadline(.seconds(60)) { [actor] in try await queue.recordLost(lost, timelines: change, actor: actor) }
                queue.acknowledged.forget(lost)
                report(lost, change)
            } else {
                logger.info(
                    "The database's timeline changed; every write this process acknowledged in the last ten minutes is there",
                    metadata: ["revoker.timeline.from": "\(change.from)", "revoker.timeline.to": "\(change.to)", "revoker.writes": "\(writes.count)"]
                )
            }
            if overflowed > state.overflowReported {
                logger.error(
                    "Writes this process acknowledged could not be checked after the failover: more than it keeps arrived in ten minutes",
                    metadata: ["revoker.writes.unchecked": "\(overflowed - state.overflowReported)"]
                )
                state.overflowReported = overflowed
            }
            state.checked = current
            state.unchecked = nil
        } catch {
            logger.warning(
                "The database's timeline changed; could not check yet for writes it lost, the next interval tries again",
                metadata: ["revoker.error": "\(error)"]
            )
        }
    }

    private func report(_ lost: [AcknowledgedWrite], _ change: (from: UInt32, to: UInt32)) {
        let byKind = Dictionary(grouping: lost, by: \.kind)
        var metadata: Logger.Metadata = ["revoker.timeline.from": "\(change.from)", "revoker.timeline.to": "\(change.to)"]
        for (kind, writes) in byKind {
            metadata["revoker.lost.\(kind.rawValue)"] = .array(writes.prefix(100).map { .string(($0.provider.map { "\($0) " } ?? "") + $0.id) })
        }
        logger.error(
            "The database failed over without writes this process had acknowledged; each is recorded (write_lost) and its app's backend told (database.write_lost)",
            metadata: metadata
        )
    }
}
