import AppleSignInSandbox
import Foundation
import RevokerConfiguration
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

    /// Calls per second from `skip` seconds after the first call to the last: the steady rate,
    /// once each worker has learned how many share the limit (within a second of starting).
    static func steadyRate(_ times: [Double], skip: Double) -> Double {
        guard let first = times.first, let last = times.last, last - first > skip + 1 else { return 0 }
        let steady = times.filter { $0 >= first + skip }
        return Double(steady.count - 1) / (last - (first + skip))
    }

    /// No five seconds of `times` (sorted) hold more than `rate` calls a second plus 10%.
    static func expectNoWindowAbove(_ rate: Double, _ times: [Double], sourceLocation: SourceLocation = #_sourceLocation) {
        let most = times.indices.map { start in times[start...].prefix { $0 < times[start] + 5 }.count }.max() ?? 0
        #expect(Double(most) <= 5 * rate * 1.1, "\(most) calls in five seconds", sourceLocation: sourceLocation)
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

    @Test func twoWorkersTogetherKeepToTheAppsLimitWithinTenPercentAndStatusShowsIt() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 32, "batch_size": 32]) { stack in
            let rate = 40.0
            let configuration = try Self.limited(stack, rate: rate)
            #expect(configuration.worker.appRequestsPerSecond == [Self.notes: rate])
            // The other app has no limit: its 80 calls would take 2 s at the notes app's rate.
            _ = try await stack.enqueueMany(clientID: "com.example.photos", prefix: "p", count: 40)
            // 160 refresh tokens: 320 calls, about 8 s at 40/s.
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 160)
            let status = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        _ = try await stack.drain(configuration: configuration)
                        return nil
                    }
                }
                group.addTask {
                    // Mid-drain, as an operator would look.
                    try await Task.sleep(for: .seconds(5))
                    return try await RevokerProcess.run(["status", "--json"], environment: stack.environment).stdout
                }
                var status: String?
                for try await output in group { status = output ?? status }
                return status
            }
            #expect(try await stack.requests().allSatisfy { $0.outcome == .revoked })

            let notes = try await Self.calls(stack, clientID: Self.notes)
            #expect(notes.count == 320)
            let observed = Self.steadyRate(notes.map(\.at), skip: 2)
            #expect(abs(observed - rate) <= rate * 0.1, "observed \(observed) calls/s against a limit of \(rate)")
            // The app without a limit was not held back by the other's.
            let photos = try await Self.calls(stack, clientID: "com.example.photos")
            #expect(photos.count == 80)
            let (firstPhoto, lastPhoto) = (try #require(photos.first), try #require(photos.last))
            #expect(lastPhoto.at - firstPhoto.at < 1.5)

            let output = try #require(status)
            let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
            let apps = try #require((report["call_rates"] as? [String: Any])?["apps"] as? [[String: Any]])
            let row = try #require(apps.first { $0["client_id"] as? String == Self.notes })
            #expect(row["limit"] as? Double == rate)
            let published = try #require(row["observed"] as? Double)
            // What the workers published: their calls over the seconds they ran, start-up included
            // (slow on a loaded machine, and a worker may not yet know of the other), so near the
            // limit rather than within 10% of it: the steady rate above is the precise check.
            #expect(published > rate * 0.5 && published < rate * 1.5, "status showed \(published) calls/s")
        }
    }

    @Test func aThrottledAppPausesForRetryAfterAndNeverExceedsItsLimit() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 32, "batch_size": 32, "retry_base_seconds": 0.1, "retry_cap_seconds": 1]) { stack in
            let rate = 40.0
            let configuration = try Self.limited(stack, rate: rate)
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 60)
            try await stack.sandbox.admin.setFaults(SandboxFaults(throttleRate: 0.05, retryAfterSeconds: 1))
            _ = try await stack.drain(configuration: configuration)
            #expect(try await stack.requests().allSatisfy { $0.outcome == .revoked })

            let calls = try await Self.calls(stack, clientID: Self.notes)
            let throttled = calls.filter { $0.status == 429 }
            #expect(!throttled.isEmpty, "the fault throttled nothing")
            // After a 429 the whole app waits for Retry-After (1 s) from when the worker reads it;
            // calls already on their way may still arrive just after it, more of them on a loaded
            // machine. So after each 429 the calls stop for most of a second at some point: without
            // the pause they would keep coming every 25 ms.
            let times = calls.map(\.at)
            for answer in throttled {
                let later = times.filter { $0 > answer.at }
                guard let last = later.last, last > answer.at + 1 else { continue }  // the run ended within the pause
                let window = [answer.at] + later.filter { $0 <= answer.at + 3 } + later.filter { $0 > answer.at + 3 }.prefix(1)
                let longest = zip(window, window.dropFirst()).map { $1 - $0 }.max() ?? 0
                #expect(longest >= 0.7, "the longest gap after a 429 was \(longest) s")
            }
            // No five seconds hold more calls than the limit allows plus 10%, bursts after a pause
            // included (a window that long absorbs the few calls a loaded machine delays together).
            Self.expectNoWindowAbove(rate, calls.map(\.at))
        }
    }

    @Test func requestsWhoseSlotIsFarAwayGoBackToTheQueueWithoutSpendingAnAttempt() async throws {
        try await RevokerTestStack.with(worker: ["concurrency": 64, "batch_size": 64]) { stack in
            // 60 requests claimed at once at 10 calls/s: their first calls' slots reach 6 s ahead,
            // past the longest wait of 5 s, so the last few go back to the queue until theirs.
            let rate = 10.0
            let configuration = try Self.limited(stack, rate: rate)
            _ = try await stack.enqueueMany(clientID: Self.notes, prefix: "n", count: 60)
            _ = try await stack.drain(configuration: configuration)
            let requests = try await stack.requests()
            #expect(requests.allSatisfy { $0.outcome == .revoked }, "\(requests.map { "\($0.state) \($0.attempts)" })")
            #expect(requests.allSatisfy { $0.attempts == 1 }, "\(requests.map(\.attempts))")
            let released = try await stack.audit().filter { $0.event == "released" }
            #expect(!released.isEmpty, "no request went back to the queue")
            #expect(released.allSatisfy { $0.detail?.contains("outbound rate limit") == true })
            let calls = try await Self.calls(stack, clientID: Self.notes)
            #expect(calls.count == 120)
            Self.expectNoWindowAbove(rate, calls.map(\.at))
        }
    }
}
