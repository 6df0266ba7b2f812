import AppleSignIn
import AppleSignInSandbox
import Foundation
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import RevokerWorker
import Testing

/// The `revoker` binary under signals, crashes and a database restart.
@Suite("revoker work and drain as processes")
struct ProcessTests {
    static let fastWorker: [String: any Sendable] = [
        "lease_seconds": 5, "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "concurrency": 4,
    ]

    @Test func aWorkerKilledMidDrainLosesNothing() async throws {
        try await RevokerTestStack.with(worker: Self.fastWorker) { harness in
            let grants = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "k", count: 40) {
                $0 % 3 == 0 ? .authorizationCode : .refreshToken
            }
            try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 100))

            let first = try RevokerProcess(["drain", "--log-level", "debug"], environment: harness.environment)
            try await eventually("8 requests succeeded while the drain runs") {
                guard first.isRunning else { throw CannotHappen("the drain ended before it could be killed: \(first.stderrSoFar.suffix(500))") }
                return try await harness.count(state: .succeeded) >= 8
            }
            first.signal(SIGKILL)
            let killed = try await first.wait()
            #expect(killed.signalled)
            // A statement the killed drain had sent still finishes at the server (a claim commits
            // after the process is gone): count once no other session of this database is at work.
            try await eventually("the killed drain's statements ended at the server") {
                let busy = try await harness.database.client.query(
                    """
                    SELECT count(*)::int FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid()
                      AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')
                    """
                ).collect().first?.decode(Int.self)
                return busy == 0
            }
            let runningAtKill = try await harness.count(state: .running)

            try await Task.sleep(for: .seconds(5.5))  // the dead worker's leases expire
            let second = try await RevokerProcess.run(["drain", "--log-level", "debug"], environment: harness.environment)
            #expect([0, 1].contains(second.status), "\(second.stderr.suffix(1000))")

            let requests = try await harness.requests()
            #expect(requests.count == 40 && requests.allSatisfy { $0.state.isFinal }, "no request is lost or stuck")
            var exchangedTwice = 0
            for grantID in grants {
                let grant = try await harness.sandbox.admin.grant(grantID)
                if grant.codeExchanges + grant.rejectedCodeExchanges > 1 {
                    exchangedTwice += 1  // the kill fell between Apple's answer and the commit of the refresh token
                } else {
                    #expect(grant.revoked, "every grant whose code was not caught in the kill window is revoked")
                }
            }
            let audit = try await harness.audit()
            let rescued = audit.filter { $0.event == "rescued" }.count
            #expect(rescued == runningAtKill, "every request in flight at the kill is rescued and audited")
            print("kill test: \(runningAtKill) in flight at SIGKILL, \(rescued) rescued, \(exchangedTwice) codes exchanged twice")
            try harness.expectNoSecrets(in: killed.stdout + killed.stderr + second.stdout + second.stderr)
            try await harness.expectNoSecretsInAudit()
        }
    }

    /// With a minute-long lease, only the liveness lock can bring the killed worker's requests back in seconds.
    @Test func aKilledWorkersRequestsAreRescuedInSecondsByAWorkerStillRunning() async throws {
        var worker = Self.fastWorker
        worker["lease_seconds"] = 60
        try await RevokerTestStack.with(worker: worker) { harness in
            let grants = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "s", count: 24) {
                $0 % 3 == 0 ? .authorizationCode : .refreshToken
            }
            // Calls of two seconds: whatever a worker claims, it holds for seconds.
            try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 2000))
            let doomed = try RevokerProcess(["work", "--log-level", "debug"], environment: harness.environment)
            let (doomedOwner, client) = (String(doomed.processIdentifier), harness.database.client)
            func count(_ sql: PostgresQuery) async throws -> Int { try await client.query(sql).collect().first?.decode(Int.self) ?? 0 }
            try await eventually("the doomed worker holds requests") {
                guard doomed.isRunning else { throw CannotHappen("the worker stopped early: \(doomed.stderrSoFar.suffix(500))") }
                return try await count(
                    "SELECT count(*)::int FROM revoker.revocation_requests WHERE state = 'running' AND split_part(lease_owner, ':', 2) = \(doomedOwner)"
                ) >= 4
            }
            let survivor = try RevokerProcess(["work", "--log-level", "debug"], environment: harness.environment)
            let survivorOwner = String(survivor.processIdentifier)
            // Killed once the survivor holds its liveness lock (it is in the register) and works,
            // while the doomed worker is still inside its calls.
            try await eventually("the survivor is registered and holds requests too") {
                guard survivor.isRunning else { throw CannotHappen("the survivor stopped: \(survivor.stderrSoFar.suffix(500))") }
                let registered = try await count(
                    "SELECT count(*)::int FROM revoker.workers WHERE split_part(owner, ':', 2) = \(survivorOwner) AND lock_lost_at IS NULL"
                )
                let working = try await count(
                    "SELECT count(*)::int FROM revoker.revocation_requests WHERE state = 'running' AND split_part(lease_owner, ':', 2) = \(survivorOwner)"
                )
                return registered == 1 && working > 0
            }
            doomed.signal(SIGKILL)
            let (killedAt, killedAtDate) = (ContinuousClock.now, Date())
            let killed = try await doomed.wait()
            #expect(killed.signalled)

            try await eventually("every request is final") { try await harness.requests().allSatisfy(\.state.isFinal) }
            let recovery = ContinuousClock.now - killedAt
            survivor.signal(SIGTERM)
            let survived = try await survivor.wait(timeout: .seconds(30))

            let rescues = try await harness.audit().filter { $0.event == "rescued" }
            #expect(!rescues.isEmpty, "the killed worker held requests")
            #expect(rescues.allSatisfy { $0.detail == "its worker is gone (liveness lock free)" }, "rescued for its lock, not a lease")
            for grantID in grants {
                let grant = try await harness.sandbox.admin.grant(grantID)
                #expect(grant.revokeCalls <= 1, "nothing is revoked twice")
                if grant.codeExchanges + grant.rejectedCodeExchanges <= 1 { #expect(grant.revoked) }
            }
            let rescuedAfter = (rescues.map(\.occurredAt).max() ?? killedAtDate).timeIntervalSince(killedAtDate)
            print(
                "liveness kill test: \(rescues.count) rescued \(String(format: "%.1f", rescuedAfter)) s after SIGKILL (lease 60 s), every request final \(recovery) after it"
            )
            try harness.expectNoSecrets(in: killed.stdout + killed.stderr + survived.stdout + survived.stderr)
        }
    }

    @Test func sigtermLetsInFlightRequestsFinish() async throws {
        var worker = Self.fastWorker
        worker["shutdown_grace_seconds"] = 15
        try await RevokerTestStack.with(worker: worker) { harness in
            _ = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "t", count: 20)
            try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 300))
            let process = try RevokerProcess(["work", "--log-level", "debug"], environment: harness.environment)
            try await eventually("the worker is at work") { try await harness.count(state: .running) > 0 }
            process.signal(SIGTERM)
            let result = try await process.wait(timeout: .seconds(30))
            #expect(result.status == 0 && !result.signalled, "\(result.stderr.suffix(1000))")
            #expect(try await harness.count(state: .running) == 0, "nothing is left running")
            let requests = try await harness.requests()
            #expect(requests.allSatisfy { $0.state == .pending || $0.outcome == .revoked })
            #expect(requests.contains { $0.outcome == .revoked }, "the in-flight requests finished")
            try harness.expectNoSecrets(in: result.stdout + result.stderr)
        }
    }

    @Test func sigtermAfterTheGracePeriodHandsRequestsBack() async throws {
        var worker = Self.fastWorker
        worker["shutdown_grace_seconds"] = 0
        try await RevokerTestStack.with(worker: worker) { harness in
            _ = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "g", count: 8)
            try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 700))
            let process = try RevokerProcess(["work"], environment: harness.environment)
            try await eventually("the worker is at work") { try await harness.count(state: .running) > 0 }
            process.signal(SIGINT)
            let result = try await process.wait(timeout: .seconds(30))
            #expect(result.status == 0, "\(result.stderr.suffix(1000))")
            #expect(try await harness.count(state: .running) == 0)
            let audit = try await harness.audit()
            #expect(audit.contains { $0.event == "released" }, "unfinished requests were handed back, audited")
            let requests = try await harness.requests()
            #expect(requests.filter { $0.state == .pending }.allSatisfy { $0.attempts == 0 }, "a handed-back request keeps its attempts")
        }
    }

    @Test func requestsHandedBackAtShutdownAreTakenAtOnceByAnIdleWorker() async throws {
        var worker = Self.fastWorker
        worker["shutdown_grace_seconds"] = 0
        // Another worker would find them at its next poll, ten minutes away (past the wait's hang
        // guard): only the wake-up brings them in time.
        worker["poll_interval_seconds"] = 600
        try await RevokerTestStack.with(worker: worker) { harness in
            _ = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "h", count: 4)
            try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 700))
            let leaving = try RevokerProcess(["work"], environment: harness.environment)
            try await eventually("the leaving worker holds all 4") { try await harness.count(state: .running) >= 4 }
            let staying = try RevokerProcess(["work"], environment: harness.environment)
            // Registered and listening, idle: nothing is pending.
            try await eventually("both workers registered") {
                try await harness.database.client.query("SELECT count(*)::int FROM revoker.workers").collect().first?.decode(Int.self) ?? 0 >= 2
            }
            leaving.signal(SIGINT)
            _ = try await leaving.wait(timeout: .seconds(30))
            try await eventually("every request revoked, taken on the wake-up") {
                try await harness.requests().allSatisfy { $0.outcome == .revoked }
            }
            staying.signal(SIGTERM)
            _ = try await staying.wait(timeout: .seconds(30))
        }
    }

    /// A database that stops answering (every byte dropped, nothing closed) must not hold a
    /// SIGTERM forever: past the shutdown limit what is left is cancelled and the process ends.
    @Test func sigtermEndsTheProcessWhenTheDatabaseStopsAnswering() async throws {
        var worker = Self.fastWorker
        worker["shutdown_grace_seconds"] = 0
        try await RevokerTestStack.with(worker: worker) { harness in
            var url = try #require(URLComponents(string: harness.database.url))
            let (host, port) = (try #require(url.host), try #require(url.port))
            try await TCPProxy.with(toHost: host, port: port) { proxy in
                url.host = "127.0.0.1"
                url.port = proxy.port
                var environment = harness.environment
                environment["DATABASE_URL"] = try #require(url.string)
                _ = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "f", count: 8)
                try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 500))
                let process = try RevokerProcess(["work", "--log-level", "info"], environment: environment)
                try await eventually("the worker is at work") {
                    guard process.isRunning else { throw CannotHappen("the worker ended: \(process.stderrSoFar.suffix(500))") }
                    return try await harness.count(state: .running) > 0
                }
                proxy.freeze()
                process.signal(SIGTERM)
                // A guard against a hang, far above the bound (grace 0 + 30 s, then 15 s for what is
                // cancelled); without the bound the process waited out every database deadline, minutes.
                let result = try await process.wait(timeout: .seconds(120))
                #expect(result.signalled || result.status != 0, "a shutdown cut short is not a clean exit: \(result.stderr.suffix(1500))")
                #expect(
                    result.stderr.contains("shutdown did not finish") || result.stderr.contains("Cancellation took longer"),
                    "it says why: \(result.stderr.suffix(1500))"
                )
                try harness.expectNoSecrets(in: result.stdout + result.stderr)
                let said = result.stderr.split(separator: "\n").last { $0.contains("shutdown") || $0.contains("Cancellation") } ?? ""
                print("shutdown test: exit \(result.status)\(result.signalled ? " (signal)" : ""): \(said.prefix(200))")
            }
        }
    }

    @Test func aDatabaseRestartDuringADrainIsSurvived() async throws {
        try await PrivatePostgres.with { server in
            try await RevokerTestStack.with(worker: Self.fastWorker, server: server.url) { harness in
                _ = try await harness.enqueueMany(clientID: "com.example.notes", prefix: "r", count: 30) {
                    $0 % 4 == 0 ? .authorizationCode : .refreshToken
                }
                try await harness.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 150))
                let drain = try RevokerProcess(["drain", "--log-level", "info"], environment: harness.environment)
                try await eventually("5 requests succeeded") { try await harness.count(state: .succeeded) >= 5 }
                try server.stop()
                try await Task.sleep(for: .seconds(2))
                #expect(drain.isRunning, "the drain was still at work while the database was down")
                try server.start()
                let result: RevokerProcess.Result
                do {
                    result = try await drain.wait(timeout: .seconds(120))
                } catch {
                    Issue.record("\(error)\nthe server's log ends: \(server.logTail)")
                    return
                }
                #expect([0, 1].contains(result.status), "the drain finished after the restart: \(result.stderr.suffix(1500))")
                let requests = try await harness.requests()
                #expect(
                    requests.count == 30 && requests.allSatisfy { $0.state.isFinal },
                    "\(requests.filter { !$0.state.isFinal }.count) left unfinished"
                )
                let sawOutage = ["Connection creation failed", "Database reachable again", "Rescued"].contains { result.stderr.contains($0) }
                #expect(sawOutage, "the drain met the outage: \(result.stderr.suffix(1500))")
            }
        }
    }

    @Test func drainExitCodesAreAsDocumented() async throws {
        try await RevokerTestStack.with(worker: Self.fastWorker) { harness in
            try await harness.enqueue(clientID: "com.example.notes", reference: "fine", kind: .refreshToken)
            let success = try await RevokerProcess.run(["drain"], environment: harness.environment)
            #expect(success.status == 0, "\(success.stderr)")
            #expect(success.stdout.contains("1 succeeded"))

            // A code that was already used: the request fails as code_rejected.
            let used = try await harness.enqueue(clientID: "com.example.notes", reference: "used", kind: .authorizationCode)
            try await harness.sandbox.withClient { client in
                let app = try #require(harness.configuration.settings(AppleSettings.self)?.apps["com.example.notes"]).apple
                _ = try await AppleAppClient(client: client, signer: try await ClientSecretSigner(app: app)).exchange(
                    code: used.secret,
                    redirectURI: nil
                )
            }
            let failed = try await RevokerProcess.run(["drain", "--json"], environment: harness.environment)
            #expect(failed.status == 1)
            #expect(failed.stdout.contains("\"code_rejected\":1"))

            // An app whose key Apple does not know: paused, so the drain ends with work waiting.
            let photos = harness.files.apps(LocalAppFiles.self)[1]
            try await harness.sandbox.admin.register(
                .init(clientID: photos.clientID, teamID: photos.teamID, keyID: photos.keyID, publicKeyPEM: LocalAppFiles.otherPublicKeyPEM())
            )
            try await harness.enqueue(clientID: photos.clientID, reference: "paused", kind: .refreshToken)
            let incomplete = try await RevokerProcess.run(["drain"], environment: harness.environment)
            #expect(incomplete.status == 3, "\(incomplete.stdout) \(incomplete.stderr)")

            var noDatabase = harness.environment
            noDatabase["DATABASE_URL"] = nil
            let couldNotRun = try await RevokerProcess.run(["drain"], environment: noDatabase)
            #expect(couldNotRun.status == 2)
            #expect(couldNotRun.stderr.contains("DATABASE_URL") && !couldNotRun.stderr.contains("Stack"))
        }
    }

    /// A cron drain after the one that paused an app: the probe is not due, so this run claims
    /// nothing of that app, yet its requests wait and the exit code must say so.
    @Test func aDrainExitsThreeWhileAPausedAppsRequestsWaitUntouched() async throws {
        var worker = Self.fastWorker
        worker["pause_probe_seconds"] = 600
        try await RevokerTestStack.with(worker: worker) { harness in
            let photos = harness.files.apps(LocalAppFiles.self)[1]
            try await harness.sandbox.admin.register(
                .init(clientID: photos.clientID, teamID: photos.teamID, keyID: photos.keyID, publicKeyPEM: LocalAppFiles.otherPublicKeyPEM())
            )
            _ = try await harness.enqueueMany(clientID: photos.clientID, prefix: "p", count: 3)
            let pausing = try await RevokerProcess.run(["drain", "--json"], environment: harness.environment)
            #expect(pausing.status == 3, "\(pausing.stdout) \(pausing.stderr.suffix(1000))")
            #expect(try await harness.queue.pausedApps().map(\.clientID) == [photos.clientID])

            try await harness.enqueue(clientID: "com.example.notes", reference: "other app", kind: .refreshToken)
            let next = try await RevokerProcess.run(["drain", "--json", "--max-duration", "60"], environment: harness.environment)
            #expect(next.status == 3, "requests wait for a paused app: \(next.stdout) \(next.stderr.suffix(1000))")
            let summary = try #require(try parseJSON(next.stdout) as? [String: Any])
            #expect(summary["succeeded"] as? Int == 1, "the other app's request was revoked")
            #expect(summary["unfinished"] as? Int == 3)
            #expect(summary["paused"] as? Int == 3)
            #expect(summary["paused_apps"] as? Int == 1)
            #expect(try await harness.count(state: .pending) == 3)
            try harness.expectNoSecrets(in: pausing.stdout + pausing.stderr + next.stdout + next.stderr)
        }
    }

    @Test func aWorkerRefusesAnUnmigratedDatabase() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { database in
            let files = try LocalConfiguration(apps: [.apple: ["com.example.notes"]])
            let result = try await RevokerProcess.run(
                ["work"],
                environment: files.environment(databaseURL: database.url, baseURL: "http://127.0.0.1:9")
            )
            #expect(result.status == 2)
            #expect(result.stderr.contains("revoker migrate"))
        }
    }
}
