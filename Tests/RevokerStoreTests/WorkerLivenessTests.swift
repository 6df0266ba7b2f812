import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Synchronization
import Testing

/// A dead worker's requests come back when its liveness lock has stayed free, not when its
/// leases expire; a live worker's, an unregistered owner's and a returning worker's do not.
@Suite("Worker liveness")
struct WorkerLivenessTests {
    /// Holds `owner`'s session while `body` runs, then ends it without unregistering (as a
    /// SIGKILL would: the connection closes, the lock goes, the registration stays).
    static func withSession<R: Sendable>(
        _ queue: RevocationQueue,
        _ db: ScratchDatabase,
        owner: String,
        _ body: () async throws -> R
    ) async throws -> R {
        let result = try await withThrowingTaskGroup(of: Void.self) { group in
            let (registered, signal) = AsyncStream.makeStream(of: Void.self)
            group.addTask {
                try await queue.withWorkerSession(owner: owner, registered: { signal.yield() }) { wakeUps in
                    for try await _ in wakeUps {}
                }
            }
            var iterator = registered.makeAsyncIterator()
            _ = await iterator.next()
            let result = try await body()
            group.cancelAll()
            try? await group.waitForAll()
            return result
        }
        // The server ends the closed session's backend, and its lock, a moment later.
        try await eventually("the closed session's lock released", every: .milliseconds(20)) { try await !lockHeld(db, owner: owner) }
        return result
    }

    static func lockHeld(_ db: ScratchDatabase, owner: String) async throws -> Bool {
        let rows = try await db.client.query(
            """
            SELECT count(*)::int FROM pg_locks
            WHERE locktype = 'advisory' AND classid = 1920364290 AND objid = revoker.worker_lock(\(owner))::oid AND objsubid = 2
            """
        ).collect()
        return try rows.first?.decode(Int.self) == 1
    }

    static func enqueue(_ count: Int, prefix: String, queue: RevocationQueue) async throws {
        for index in 0..<count {
            _ = try await queue.enqueue(Fixtures.new("\(prefix)-\(index)"), actor: "test")
        }
    }

    static func registered(_ db: ScratchDatabase) async throws -> [String: Bool] {
        let rows = try await db.client.query("SELECT owner, lock_lost_at IS NOT NULL FROM revoker.workers").collect()
        return Dictionary(uniqueKeysWithValues: try rows.map { try $0.decode((String, Bool).self) })
    }

    @Test func aDeadWorkersRequestsAreRescuedOnceItsLockHasStayedFree() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.enqueue(3, prefix: "ref", queue: queue)
            let dead = try await Self.withSession(queue, db, owner: "w-dead") {
                try await queue.claim(batch: 2, lease: .seconds(600), owner: "w-dead")
            }
            #expect(dead.count == 2)
            try await Self.withSession(queue, db, owner: "w-live") {
                let live = try #require(try await queue.claim(batch: 1, lease: .seconds(600), owner: "w-live").first)
                try await Self.enqueue(5, prefix: "later", queue: queue)

                // The first pass only suspects the dead owner: its lock may come back.
                #expect(try await queue.rescue(confirmation: .seconds(1)) == RescueResult(rescued: 0, awaitingConfirmation: 2))
                #expect(try await Self.registered(db) == ["w-dead": true, "w-live": false])
                try await Task.sleep(for: .milliseconds(1100))
                #expect(try await queue.rescue(confirmation: .seconds(1)) == RescueResult(rescued: 2, awaitingConfirmation: 0))
                #expect(try await Self.registered(db) == ["w-live": false], "the dead owner is forgotten, the live one stays")

                for claimed in dead {
                    let request = try #require(try await queue.request(id: claimed.request.id))
                    #expect(request.state == .pending && request.leaseOwner == nil)
                    #expect(try await queue.finish(claimed.lease, state: .succeeded, outcome: .revoked) == false, "the dead owner's fence is stale")
                    let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: claimed.request.id))
                    #expect(audit.records.last?.event == "rescued")
                    #expect(audit.records.last?.detail == "its worker is gone (liveness lock free)")
                }
                #expect(try await queue.request(id: live.request.id)?.state == .running, "a live worker's request stays its own")
                #expect(try await queue.finish(live.lease, state: .succeeded, outcome: .revoked))

                // Rescued requests keep their place in line, before the backlog enqueued after their claim.
                let next = try await queue.claim(batch: 2, lease: .seconds(600), owner: "w-live")
                #expect(Set(next.map(\.request.id)) == Set(dead.map(\.request.id)))
            }
        }
    }

    @Test func aWorkerThatTakesItsLockBackIsNotRescued() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.enqueue(1, prefix: "back", queue: queue)
            let claimed = try await Self.withSession(queue, db, owner: "w-blip") { () async throws in
                try #require(try await queue.claim(batch: 1, lease: .seconds(600), owner: "w-blip").first)
            }
            #expect(try await queue.rescue(confirmation: .seconds(1)).awaitingConfirmation == 1)
            try await Self.withSession(queue, db, owner: "w-blip") { () async throws in
                #expect(try await Self.registered(db) == ["w-blip": false], "taking the lock back clears the suspicion")
                try await Task.sleep(for: .milliseconds(1100))
                #expect(try await queue.rescue(confirmation: .seconds(1)) == RescueResult(rescued: 0, awaitingConfirmation: 0))
                #expect(try await queue.finish(claimed.lease, state: .succeeded, outcome: .revoked))
            }
        }
    }

    @Test func aClaimWhileLiveTakesWorkOnlyWhileTheLockIsHeldWhereItRuns() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.enqueue(2, prefix: "live", queue: queue)
            // Its session gone unnoticed (the server has no lock of it): it claims nothing, and says why.
            await #expect(throws: RevokerStoreError.self) {
                try await queue.claim(batch: 2, lease: .seconds(60), owner: "w-ghost", whileLive: true)
            }
            #expect(try await queue.statistics().byState[.pending] == 2, "nothing was claimed")
            let claimed = try await Self.withSession(queue, db, owner: "w-live") { () async throws in
                try await queue.claim(batch: 1, lease: .seconds(60), owner: "w-live", whileLive: true)
            }
            #expect(claimed.count == 1, "its lock held: it claims")
            // Suspected by a rescuer, its lock free: nothing more, until it takes its lock back.
            #expect(try await queue.rescue(confirmation: .seconds(60)).awaitingConfirmation == 1)
            do {
                _ = try await queue.claim(batch: 1, lease: .seconds(60), owner: "w-live", whileLive: true)
                Issue.record("a suspected worker claimed")
            } catch let error as RevokerStoreError {
                #expect(error.code == .livenessLost)
            }
            try await Self.withSession(queue, db, owner: "w-live") { () async throws in
                #expect(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w-live", whileLive: true).count == 1)
                #expect(try await queue.claim(batch: 1, lease: .seconds(60), owner: "w-live", whileLive: true).isEmpty, "none left: no error")
            }
        }
    }

    @Test func aSessionNeverWaitsForItsLockAndCanBeEndedFromOutside() async throws {
        try await Fixtures.withQueue { db, queue in
            let ended = try await Self.withSession(queue, db, owner: "w-twice") { () async throws -> Bool in
                // A second session of the same owner (the first one's server side not yet gone)
                // is refused at once, for the next try, instead of waiting behind the lock.
                let started = ContinuousClock.now
                await #expect(throws: RevokerStoreError.self) {
                    try await queue.withWorkerSession(owner: "w-twice", registered: { Issue.record("registered twice") }) { _ in }
                }
                #expect(ContinuousClock.now - started < .seconds(5))
                return true
            }
            #expect(ended)

            let session = Opened()
            let outcome = try await withThrowingTaskGroup(of: Bool.self) { group in
                let (registered, signal) = AsyncStream.makeStream(of: Void.self)
                group.addTask {
                    do {
                        try await queue.withWorkerSession(
                            owner: "w-end",
                            opened: { new in session.value.withLock { $0 = new } },
                            registered: { signal.yield() }
                        ) {
                            wakeUps in for try await _ in wakeUps {}
                        }
                        return false
                    } catch {
                        return true
                    }
                }
                var iterator = registered.makeAsyncIterator()
                _ = await iterator.next()
                #expect(try await Self.lockHeld(db, owner: "w-end"))
                session.value.withLock { $0 }?.end()
                return try await group.next() ?? false
            }
            #expect(outcome, "ended from outside, the session ends with an error")
            try await eventually("the ended session's lock released", every: .milliseconds(20)) { try await !Self.lockHeld(db, owner: "w-end") }
        }
    }

    @Test func anUnregisteredOwnerReliesOnItsLease() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.enqueue(1, prefix: "old", queue: queue)
            // An older binary claims without a liveness lock: nothing but the lease tells it is gone.
            let claimed = try #require(try await queue.claim(batch: 1, lease: .seconds(600), owner: "w-old").first)
            #expect(try await queue.rescue(confirmation: .zero) == RescueResult(rescued: 0, awaitingConfirmation: 0))
            #expect(try await queue.request(id: claimed.request.id)?.state == .running)
            #expect(try await Self.registered(db).isEmpty)
        }
    }

    @Test func aSessionRegistersAndItsEndReleasesTheLock() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.withSession(queue, db, owner: "w-one") { () async throws in
                #expect(try await Self.lockHeld(db, owner: "w-one"))
                #expect(try await Self.registered(db) == ["w-one": false])
            }
            #expect(
                try await Self.lockHeld(db, owner: "w-one") == false,
                "the session's connection is closed, not handed back to the pool holding the lock"
            )
            try await queue.unregisterWorker(owner: "w-one")
            #expect(try await Self.registered(db).isEmpty)
        }
    }

    // MARK: Through a failover

    @Test func aReadOnlyServerRefusesTheRegistrationForNowAndTheNextTryTakesIt() async throws {
        try await Fixtures.withQueue { db, queue in
            try await db.startSessions(readOnly: true, endingOpenSessions: true)
            let refusal = try await eventuallyValue("a read-only session refused the registration") { () async throws -> RevokerStoreError? in
                do {
                    try await queue.withWorkerSession(owner: "w-ro", registered: {}) { _ in }
                    return nil
                } catch let error as RevokerStoreError where error.detail?.contains("25006") == true {
                    return error
                } catch {
                    return nil  // a session the termination ended, met by the pool
                }
            }
            #expect(refusal.code != .livenessUnavailable, "a server that cannot now is not a role that may not: the worker tries again")

            try await db.startSessions(readOnly: false, endingOpenSessions: true)
            try await eventually("the next try takes the lock and registers") {
                (try? await Self.withSession(queue, db, owner: "w-ro") { try await Self.registered(db) == ["w-ro": false] }) ?? false
            }
        }
    }

    @Test func onlyAMissingPrivilegeRefusesTheLockForGood() {
        for refusal in ["42501", "42P01", "42883"] {
            #expect(RevocationQueue.refusesForGood(refusal), "\(refusal): the role lacks the 0011 grants")
        }
        for transient in ["25006", "57P01", "57P03", "08006", "40001", "53300", nil] {
            #expect(!RevocationQueue.refusesForGood(transient), "\(transient ?? "no server error"): tried again")
        }
    }

    @Test func whatAWorkerNoLongerCarriesIsHandedBackWithItsAttempt() async throws {
        try await Fixtures.withQueue { db, queue in
            try await Self.enqueue(4, prefix: "cut", queue: queue)
            let mine = try await queue.claim(batch: 3, lease: .seconds(600), owner: "w-cut")
            let other = try #require(try await queue.claim(batch: 1, lease: .seconds(600), owner: "w-other").first)
            #expect(mine.count == 3)
            let carried = mine[0]
            let handed = try await queue.handBackUntracked(owner: "w-cut", keeping: [carried.request.id])
            #expect(handed == 2)
            for lost in mine.dropFirst() {
                let request = try #require(try await queue.request(id: lost.request.id))
                #expect(request.state == .pending && request.leaseOwner == nil && request.attempts == 0, "its attempt given back")
                #expect(try await queue.finish(lost.lease, state: .succeeded, outcome: .revoked) == false, "its old lease is stale")
                let audit = try await AuditLog(client: db.client, logger: Logger(label: "t")).query(AuditQuery(requestID: lost.request.id))
                #expect(audit.records.last?.event == "released")
            }
            #expect(try await queue.request(id: other.request.id)?.state == .running, "another worker's request is its own")
            #expect(try await queue.finish(carried.lease, state: .succeeded, outcome: .revoked), "what it carries stays its own")
            #expect(try await queue.handBackUntracked(owner: "w-cut", keeping: []) == 0)
        }
    }

    /// A queue whose connections go through `proxy`, listening with a quick heartbeat.
    static func withQueue<R: Sendable>(
        through proxy: TCPProxy,
        _ db: ScratchDatabase,
        _ queue: RevocationQueue,
        _ body: (RevocationQueue) async throws -> R
    ) async throws -> R {
        var url = try #require(URLComponents(string: db.url))
        url.host = "127.0.0.1"
        url.port = proxy.port
        let client = PostgresClient(configuration: try PostgresClient.Configuration(url: try #require(url.string)))
        let running = Task { await client.run() }
        defer { running.cancel() }
        var proxied = RevocationQueue(client: client, sealer: try Fixtures.sealer(), logger: Logger(label: "test"))
        proxied.listenHeartbeat = ListenHeartbeat(interval: .milliseconds(50), timeout: .milliseconds(500))
        return try await body(proxied)
    }

    @Test func aListeningConnectionThatAnswersOutlivesItsHeartbeats() async throws {
        try await Fixtures.withQueue { db, queue in
            let (host, port) = (try #require(URLComponents(string: db.url)?.host), try #require(URLComponents(string: db.url)?.port))
            try await TCPProxy.with(toHost: host, port: port) { proxy in
                try await Self.withQueue(through: proxy, db, queue) { proxied in
                    let heard = try await proxied.withWakeUps { wakeUps in
                        // Its own backend's last statement is a heartbeat: one has been answered.
                        try await eventually("a heartbeat was answered") {
                            let rows = try await db.client.query(
                                "SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND query = 'SELECT 1'"
                            ).collect()
                            return try rows.first?.decode(Int.self) ?? 0 > 0
                        }
                        try await queue.wakeWorkers()
                        var iterator = wakeUps.makeAsyncIterator()
                        return try await iterator.next() != nil
                    }
                    #expect(heard, "still listening after its heartbeats")
                }
            }
        }
    }

    @Test func aListeningConnectionThatStopsAnsweringIsClosed() async throws {
        try await Fixtures.withQueue { db, queue in
            let (host, port) = (try #require(URLComponents(string: db.url)?.host), try #require(URLComponents(string: db.url)?.port))
            try await TCPProxy.with(toHost: host, port: port) { proxy in
                try await Self.withQueue(through: proxy, db, queue) { proxied in
                    // Hang guard only: without the heartbeat the listener waits for ever.
                    let ended = try await withDeadline(.seconds(60)) { () async -> Bool in
                        do {
                            try await proxied.withWakeUps { wakeUps in
                                proxy.freeze()
                                for try await _ in wakeUps {}
                            }
                            return false
                        } catch {
                            return true
                        }
                    }
                    #expect(ended, "the frozen connection ended the listener with an error")
                }
            }
        }
    }
}

/// The session a test opened, to end it from outside.
final class Opened: Sendable {
    let value = Mutex<WorkerSession?>(nil)
}
