import AppleSignInSandbox
import Foundation
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// Outbound rate limits, measured where the calls arrive: the sandbox's record of every call.
@Suite("Calls to a provider keep to the app's rate limit")
struct RateLimitTests {
    static let notes = "com.example.notes"

    /// When every call of `clientID` arrived at the sandbox, in order, and whether it was throttled.
    static func calls(_ stack: RevokerTestStack, clientID: String) async throws -> [(at: Double, status: Int)] {
        try await stack.sandbox.admin.grants().filter { $0.clientID == clientID }.flatMap(\.calls).map { ($0.at, $0.status) }
            .sorted { $0.at < $1.at }
    }

    /// A call reaches the sandbox after its slot, never before, and slots are `1 / rate` apart:
    /// so by the time the `n`th call arrives, at most `rate` calls a second since `start` (taken
    /// before the workers were built) plus `allowance` can have arrived, however late a loaded
    /// machine delivers them. (Windows of a few seconds fail when a stall sends delayed calls
    /// together; this count cannot.)
    static func expectNeverAhead(
        of rate: Double,
        since start: Double,
        _ times: [Double],
        allowance: Double,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (index, time) in times.enumerated() where Double(index + 1) > rate * (time - start) + allowance {
            Issue.record(
                "\(index + 1) calls by \(time - start) s after the start: ahead of \(rate) calls a second",
                sourceLocation: sourceLocation
            )
            return
        }
    }

    /// The notes app's row of `revoker status --json`'s call rates.
    static func notesRates(in output: String) throws -> [String: Any]? {
        let report = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
        let apps = (report?["call_rates"] as? [String: Any])?["apps"] as? [[String: Any]]
        return apps?.first { $0["client_id"] as? String == notes }
    }

    /// The configuration with `rate` calls per second for the notes app, read from the file as an operator writes it.
    static func limited(_ stack: RevokerTestStack, rate: Double) throws -> RevokerConfiguration {
        let url = URL(fileURLWithPath: stack.files.configFile)
        var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var apps = try #require(document["apps"] as? [[String: Any]])
        for index in apps.indices where apps[index]["client_id"] as? String == notes {
            apps[index]["max_requests_per_second"] = rate
        }
        document["apps"] = apps
        try JSONSerialization.data(withJSONObject: document).write(to: url)
        return try RevokerConfiguration.load(file: url.path, environment: stack.environment)
    }

    @Test func twoWorkersTogetherKeepToTheAppsLimitAndStatusShowsIt() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 32, "batch_size": 32]) { stack in
            let rate = 40.0
            let configuration = try Self.limited(stack, rate: rate)
            #expect(configuration.worker.appRequestsPerSecond == [Self.notes: rate])
            // The other app has no limit: its 80 calls would take 2 s at the notes app's rate.
            _ = try await stack.enqueueMany(clientID: "com.example.photos", prefix: "p", count: 40)
            // 160 refresh tokens: 320 calls, about 8 s at 40/s.
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 160)
            let start = Date().timeIntervalSince1970
            let status = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        _ = try await stack.drain(configuration: configuration)
                        return nil
                    }
                }
                group.addTask {
                    // Mid-drain, as an operator would look, until a look finds the workers' rates
                    // (a loaded machine may be slow to publish them) or the drain is over.
                    try await eventuallyValue("the workers' rates in `revoker status`, or the drain over", every: .seconds(1)) {
                        let output = try await RevokerProcess.run(["status", "--json"], environment: stack.environment).stdout
                        if (try Self.notesRates(in: output)?["observed"] as? Double ?? 0) > 0 { return output }
                        if try await stack.count(state: .pending) + stack.count(state: .running) == 0 { return output }
                        return nil
                    }
                }
                var status: String?
                for try await output in group { status = output ?? status }
                return status
            }
            #expect(try await stack.requests().allSatisfy { $0.outcome == .revoked })

            let notes = try await Self.calls(stack, clientID: Self.notes)
            #expect(notes.count == 320)
            // Together at most the limit: a worker alone at the whole limit until it learns of the
            // other (its next look at the register, a second or two) is the allowance beside the
            // first slot of each. Without the sharing the two would make twice the calls.
            Self.expectNeverAhead(of: rate, since: start, notes.map(\.at), allowance: rate + 2)
            // The app without a limit was not held back by the other's: at some point its calls came
            // faster than that limit allows (more than half a second's worth, and the slot it could
            // have had first, within half a second).
            let photos = try await Self.calls(stack, clientID: "com.example.photos").map(\.at)
            #expect(photos.count == 80)
            let burst = photos.indices.map { start in photos[start...].prefix { $0 < photos[start] + 0.5 }.count }.max() ?? 0
            #expect(Double(burst) > rate / 2 + 2, "at most \(burst) calls of the app without a limit within half a second")

            let output = try #require(status)
            let row = try #require(try Self.notesRates(in: output))
            #expect(row["limit"] as? Double == rate)
            // What the workers published mid-drain: some calls a second (how many depends on how
            // fast a loaded machine runs them; the limit is checked above, at the sandbox).
            let published = try #require(row["observed"] as? Double)
            #expect(published > 0, "status showed \(published) calls/s")
        }
    }

    @Test func aThrottledAppPausesForRetryAfterAndNeverExceedsItsLimit() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 32, "batch_size": 32, "retry_base_seconds": 0.1, "retry_cap_seconds": 1]) { stack in
            let rate = 40.0
            let configuration = try Self.limited(stack, rate: rate)
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 60)
            try await stack.sandbox.admin.setFaults(SandboxFaults(throttleRate: 0.05, retryAfterSeconds: 2))
            let start = Date().timeIntervalSince1970
            _ = try await stack.drain(configuration: configuration)
            #expect(try await stack.requests().allSatisfy { $0.outcome == .revoked })

            let calls = try await Self.calls(stack, clientID: Self.notes)
            let throttled = calls.filter { $0.status == 429 }
            #expect(!throttled.isEmpty, "the fault throttled nothing")
            // After a 429 the whole app waits for Retry-After (2 s) from when the worker reads it;
            // calls already on their way still arrive after the 429, later on a loaded machine. So
            // after each 429 the calls stop for at least half the pause at some point, leaving a
            // loaded machine a second for those in flight: without the pause they would keep
            // coming every 25 ms.
            let times = calls.map(\.at)
            for answer in throttled {
                let later = times.filter { $0 > answer.at }
                guard let last = later.last, last > answer.at + 2 else { continue }  // the run ended within the pause
                let window = [answer.at] + later.filter { $0 <= answer.at + 5 } + later.filter { $0 > answer.at + 5 }.prefix(1)
                let longest = zip(window, window.dropFirst()).map { $1 - $0 }.max() ?? 0
                #expect(longest >= 1, "the longest gap after a 429 was \(longest) s")
            }
            // Never ahead of the limit, bursts after a pause included (a pause restarts the spacing
            // from its end, hence one more slot per 429).
            Self.expectNeverAhead(of: rate, since: start, times, allowance: 1 + Double(throttled.count))
        }
    }

    @Test func requestsWhoseSlotIsFarAwayGoBackToTheQueueWithoutSpendingAnAttempt() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 64, "batch_size": 64]) { stack in
            // 60 requests claimed at once at 10 calls/s: their first calls' slots reach 6 s ahead,
            // past the longest wait of 5 s, so the last few go back to the queue until theirs.
            let rate = 10.0
            let configuration = try Self.limited(stack, rate: rate)
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 60)
            let start = Date().timeIntervalSince1970
            _ = try await stack.drain(configuration: configuration)
            let requests = try await stack.requests()
            #expect(requests.allSatisfy { $0.outcome == .revoked }, "\(requests.map { "\($0.state) \($0.attempts)" })")
            #expect(requests.allSatisfy { $0.attempts == 1 }, "\(requests.map(\.attempts))")
            let released = try await stack.audit().filter { $0.event == "released" }
            #expect(!released.isEmpty, "no request went back to the queue")
            #expect(released.allSatisfy { $0.detail?.contains("outbound rate limit") == true })
            let calls = try await Self.calls(stack, clientID: Self.notes)
            #expect(calls.count == 120)
            Self.expectNeverAhead(of: rate, since: start, calls.map(\.at), allowance: 1)
        }
    }
}
