import AppleSignInSandbox
import Foundation
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// `revoker keys rotate` re-seals held grants and waiting requests under a new sealing key while
/// a drain runs, and afterwards the old key can go.
@Suite("revoker keys")
struct KeyRotationTests {
    static let notes = "com.example.notes"

    @Test func rotatingTheSealingKeyWhileADrainRunsLosesNothing() async throws {
        try await RevokerTestStack.with(worker: ProcessTests.fastWorker) { stack in
            var held: [String] = []
            for index in 0..<120 {
                let minted = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "sub-\(index)")
                stack.secrets.add(minted.value)
                _ = try await stack.queue.register(
                    try NewGrant(
                        clientID: Self.notes,
                        accountReference: "r-\(index)",
                        credential: Credential(kind: .refreshToken, secret: minted.value),
                        userID: "sub-\(index)"
                    ),
                    actor: "test"
                )
                held.append(minted.grantID)
            }
            for index in 0..<60 { _ = try await stack.queue.requestDeletion(accountReference: "r-\(index)", actor: "test") }
            let enqueued = try await stack.enqueueMany(clientID: Self.notes, prefix: "p", count: 40)

            // A new current key, as an operator appends it; the processes started now seal with it.
            let keys = stack.files.sealingKeysFile
            let oldEntry = try String(contentsOfFile: keys, encoding: .utf8)
            let newEntry = try CredentialKeyring.generateEntry(keyID: "k2")
            try Data((oldEntry + newEntry + "\n").utf8).write(to: URL(fileURLWithPath: keys))
            try await stack.sandbox.admin.setFaults(SandboxFaults(latencyMilliseconds: 30))

            let drain = try RevokerProcess(["drain"], environment: stack.environment)
            try await eventually("the drain is under way") {
                guard drain.isRunning else { throw CannotHappen("the drain ended early: \(drain.stderrSoFar.suffix(500))") }
                return try await stack.count(state: .succeeded) >= 120 + 10
            }
            var rotated = try await RevokerProcess.run(["keys", "rotate", "--batch-size", "5"], environment: stack.environment)
            let finishedDuringRotation = try await stack.count(state: .succeeded) - 120
            #expect([0, 3].contains(rotated.status), "\(rotated.stdout) \(rotated.stderr)")
            let drained = try await drain.wait()
            #expect(drained.status == 0, "\(drained.stderr.suffix(1000))")
            if rotated.status == 3 {
                rotated = try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            }
            #expect(rotated.status == 0, "\(rotated.stdout) \(rotated.stderr)")
            #expect(rotated.stdout.contains("No row is sealed under k1 any more"), "\(rotated.stdout)")
            let usage = try await RevokerProcess.run(["keys", "usage"], environment: stack.environment)
            #expect(usage.stdout == "k2 (current): 60 held grants, 0 requests\n", "\(usage.stdout)")
            print("rotation during a drain: \(finishedDuringRotation) of 100 revocations finished when the first rotate ended")

            let requests = try await stack.requests().filter { $0.purpose != .hold }
            #expect(requests.count == 100 && requests.allSatisfy { $0.state == .succeeded && $0.outcome == .revoked }, "nothing is lost")
            for (index, grant) in held.enumerated() {
                let report = try await stack.sandbox.admin.grant(grant)
                #expect(report.revokeCalls == (index < 60 ? 1 : 0), "grant \(index): \(report)")
            }
            for grant in enqueued { #expect(try await stack.sandbox.admin.grant(grant).revokeCalls == 1) }

            // A keyring without the key that seals the rows is refused by check and rotate.
            let stranger = try CredentialKeyring.generateEntry(keyID: "k3")
            try Data((stranger + "\n").utf8).write(to: URL(fileURLWithPath: keys))
            let lacking = try await RevokerProcess.run(["check"], environment: stack.environment)
            #expect(lacking.status == 1)
            #expect(lacking.stderr.contains("stored rows are sealed under key k2, which the sealing keys file lacks"), "\(lacking.stderr)")
            let refused = try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            #expect(refused.status == 2 && refused.stderr.contains("sealed under key k2"), "\(refused.stderr)")

            // With the old key gone, everything still held opens: the rest of the accounts are deleted.
            try Data((newEntry + "\n").utf8).write(to: URL(fileURLWithPath: keys))
            let checked = try await RevokerProcess.run(["check"], environment: stack.environment)
            #expect(checked.status == 0, "\(checked.stderr)")
            let report = try #require(try parseJSON(checked.stdout) as? [String: Any])
            let inUse = (report["sealing_keys"] as? [String: Any])?["in_use"] as? [String: [String: Int]]
            #expect(inUse == ["k2": ["grants": 60, "requests": 0]], "\(checked.stdout)")
            for index in 60..<120 { _ = try await stack.queue.requestDeletion(accountReference: "r-\(index)", actor: "test") }
            let rest = try await RevokerProcess.run(["drain"], environment: stack.environment)
            #expect(rest.status == 0, "\(rest.stderr.suffix(1000))")
            for grant in held { #expect(try await stack.sandbox.admin.grant(grant).revokeCalls == 1) }
            for result in [rotated, drained, usage, lacking, refused, checked, rest] { try stack.expectNoSecrets(in: result.stdout + result.stderr) }
        }
    }
}
