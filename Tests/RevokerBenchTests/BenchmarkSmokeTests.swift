import Foundation
import RevokerBench
import RevokerLocalStack
import RevokerTesting
import Testing

/// The benchmark's small-N run: correctness only. Speed is reported by `scripts/bench`, never asserted.
@Suite("revoker bench --smoke")
struct BenchmarkSmokeTests {
    @Test func theSmokeRunRevokesEveryRequestWithOneAndTwoWorkersOverHTTPSAndAMixedWorkloadAndRecoversFromAKill() async throws {
        let options = BenchmarkOptions.smoke(binary: RevokerProcess.binary, databaseURL: try ScratchDatabase.baseURL())
        let report = try await Benchmark(options: options).run()

        #expect(report.valid, "\(report.table())")
        #expect(report.drains.map(\.workerProcesses) == [1, 2, 1, 1])
        #expect(report.drains.map(\.workload) == ["apple", "apple", "apple", "apple+google+facebook"])
        #expect(report.drains.map(\.transport) == ["http1", "http1", "https", "http1"])
        // Over HTTP/2 one worker's calls share a few connections; over HTTP/1.1 at least one each.
        let https = try #require(report.drains.first { $0.transport == "https" })
        #expect((1...4).contains(https.providerConnections ?? 0), "\(report.table())")
        #expect(report.drains.allSatisfy { ($0.providerConnections ?? 0) >= 1 })
        for drain in report.drains {
            #expect(drain.problems.isEmpty, "\(drain.problems)")
            #expect(drain.requests == options.requests)
        }
        #expect(report.enqueue.map(\.path) == ["swift", "sql", "http"])
        #expect(report.enqueue.allSatisfy { $0.requests == options.requests })
        #expect(report.pickup?.milliseconds.samples == options.pickupSamples)
        // One of two workers SIGKILLed mid-drain: what it held is rescued, every grant revoked once.
        let recovery = try #require(report.recovery)
        #expect(recovery.valid, "\(recovery.problems)")
        #expect(recovery.orphaned > 0)
        // Custody: every code registered and exchanged once, every account deleted by reference with
        // each grant revoked once, also with the worker SIGKILLed while registering and deleting.
        #expect(report.custody.map(\.killed) == [0, 2])
        for run in report.custody {
            #expect(run.valid, "\(run.problems)")
            #expect(run.registrations == 3 * run.accounts)
            #expect(run.deletionToCompletedMilliseconds.samples == options.custodyDeletionSamples)
        }
        // The JSON written for people and CI decodes back and holds the same verdict.
        let decoded = try JSONSerialization.jsonObject(with: report.json()) as? [String: Any]
        #expect((decoded?["drains"] as? [Any])?.count == 4)
        #expect(report.table().contains("apple+google+facebook"))
    }
}
