import Foundation
import ProviderSandbox
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a failover does to a worker's connections, without the full stack (scripts/failover-test
/// runs the real one): every connection cut at once, a new primary still read-only for a moment
/// (`25006`), and a server that stops answering without closing anything.
@Suite("A worker through a database failover")
struct DatabaseFailoverTests {
    /// A lease far longer than the test's hang guard: whatever finishes did not wait for one.
    static let worker: [String: any Sendable] = [
        "lease_seconds": 600, "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "concurrency": 4,
    ]

    @Test func aWorkerTakesItsLockBackAndHandsBackWhatItLostTrackOfWithoutWaitingForLeases() async throws {
        try await RevokerTestStack.with(worker: Self.worker) { stack in
            var url = try #require(URLComponents(string: stack.database.url))
            let (host, port) = (try #require(url.host), try #require(url.port))
            try await TCPProxy.with(toHost: host, port: port) { proxy in
                url.host = "127.0.0.1"
                url.port = proxy.port
                var environment = stack.environment
                environment["DATABASE_URL"] = try #require(url.string)
                let grants = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "f", count: 12)
                try await stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 1_000))
                let work = try RevokerProcess(["work", "--log-level", "debug"], environment: environment)
                defer { work.signal(SIGKILL) }
                try await eventually("the worker holds its lock and is at work") {
                    guard work.isRunning else { throw CannotHappen("the worker ended: \(work.stderrSoFar.suffix(500))") }
                    let running = try await stack.count(state: .running)
                    return try await stack.queue.liveWorkers() == 1 && running >= 4
                }

                // The primary stops answering, closing nothing: the session's heartbeat notices.
                proxy.freeze()
                try await eventually("the worker noticed its silent connection") {
                    work.stderrSoFar.contains("A listening database connection stopped answering")
                }
                // The failover: every connection cut, the new primary read-only for a moment.
                try await stack.database.startSessions(readOnly: true)
                proxy.cutAll()
                proxy.thaw()
                try await eventually("the read-only server refused the worker's registration") {
                    work.stderrSoFar.contains("Cannot take the worker's liveness lock yet") && work.stderrSoFar.contains("25006")
                }
                try await stack.database.startSessions(readOnly: false)
                proxy.cutAll()
                try await stack.sandbox.admin.setFaults(SandboxFaults())

                try await eventually("the worker holds its lock again") { try await stack.queue.liveWorkers() == 1 }
                try await eventually("every request finished, none waiting for a lease") {
                    try await stack.requests().allSatisfy { $0.state == .succeeded }
                }
                let handedBack = try await stack.audit().filter { $0.event == "released" && ($0.detail ?? "").contains("lost track") }
                #expect(!handedBack.isEmpty, "the cut interrupted requests mid-way, and the worker handed them back")
                let reports = try await stack.sandbox.admin.grants().filter { grants.contains($0.id) }
                #expect(reports.count == grants.count && reports.allSatisfy { $0.revocations >= 1 }, "every grant revoked")
                #expect(work.isRunning)
                try stack.expectNoSecrets(in: work.stderrSoFar)
            }
        }
    }

    @Test func aTokenAnExchangeReturnedIsRevokedWhenTheDatabaseCannotTakeIt() async throws {
        try await RevokerTestStack.with(worker: Self.worker) { stack in
            var url = try #require(URLComponents(string: stack.database.url))
            let (host, port) = (try #require(url.host), try #require(url.port))
            try await TCPProxy.with(toHost: host, port: port) { proxy in
                url.host = "127.0.0.1"
                url.port = proxy.port
                var environment = stack.environment
                environment["DATABASE_URL"] = try #require(url.string)
                let grants = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "code", count: 3) { _ in .authorizationCode }
                // Slow exchanges: the database goes silent while they are in flight (4 s, so that
                // a loaded machine still freezes it before they answer).
                try await stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 4_000))
                let work = try RevokerProcess(["work", "--log-level", "debug"], environment: environment)
                defer { work.signal(SIGKILL) }
                try await eventually("the exchanges are under way") {
                    guard work.isRunning else { throw CannotHappen("the worker ended: \(work.stderrSoFar.suffix(500))") }
                    return try await stack.audit().filter { $0.event == "exchange_started" }.count == grants.count
                }
                proxy.freeze()
                try await eventually("the worker could not store what the exchanges returned") {
                    work.stderrSoFar.contains("Could not store the refresh token an exchange returned; revoked it without recording it")
                }
                proxy.cutAll()
                proxy.thaw()
                try await stack.sandbox.admin.setFaults(SandboxFaults())
                try await eventually("every request ended") {
                    try await stack.requests().allSatisfy { $0.state == .failed || $0.state == .succeeded }
                }
                // The retries found only the spent codes (exchange_lost), but no grant outlives them.
                let reports = try await stack.sandbox.admin.grants().filter { grants.contains($0.id) }
                #expect(reports.count == grants.count)
                #expect(reports.allSatisfy { $0.revocations == 1 }, "\(reports.map(\.revocations))")
                #expect(try await stack.requests().allSatisfy { $0.outcome == .exchangeLost || $0.outcome == .revoked })
                try stack.expectNoSecrets(in: work.stderrSoFar)
            }
        }
    }
}
