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
                _ = try await stack.queue.custody.register(
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
            for index in 0..<60 { _ = try await stack.queue.deletions.request(accountReference: "r-\(index)", actor: "test") }
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
            // Rotate names the missing key and every row it strands, and writes nothing.
            let refused = try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            #expect(
                refused.status == 4 && refused.stderr.contains("60 rows are sealed under key k2, which the sealing keys file lacks"),
                "\(refused.stderr)"
            )
            #expect(refused.stdout.contains("60 cannot be opened, left as they are:"), "\(refused.stdout)")

            // With the old key gone, everything still held opens: the rest of the accounts are deleted.
            try Data((newEntry + "\n").utf8).write(to: URL(fileURLWithPath: keys))
            let checked = try await RevokerProcess.run(["check"], environment: stack.environment)
            #expect(checked.status == 0, "\(checked.stderr)")
            let report = try #require(try parseJSON(checked.stdout) as? [String: Any])
            let inUse = (report["sealing_keys"] as? [String: Any])?["in_use"] as? [String: [String: Int]]
            #expect(inUse == ["k2": ["grants": 60, "requests": 0]], "\(checked.stdout)")
            for index in 60..<120 { _ = try await stack.queue.deletions.request(accountReference: "r-\(index)", actor: "test") }
            let rest = try await RevokerProcess.run(["drain"], environment: stack.environment)
            #expect(rest.status == 0, "\(rest.stderr.suffix(1000))")
            for grant in held { #expect(try await stack.sandbox.admin.grant(grant).revokeCalls == 1) }
            for result in [rotated, drained, usage, lacking, refused, checked, rest] { try stack.expectNoSecrets(in: result.stdout + result.stderr) }
        }
    }

    /// Appends a new current key `k2` to the stack's sealing keys file, as an operator does;
    /// returns the keyring of `k2` alone (what is left once `k1` is removed).
    static func appendKey(_ stack: RevokerTestStack) throws -> CredentialKeyring {
        let keys = stack.files.sealingKeysFile
        let oldEntry = try String(contentsOfFile: keys, encoding: .utf8)
        let newEntry = try CredentialKeyring.generateEntry(keyID: "k2")
        try Data((oldEntry + newEntry + "\n").utf8).write(to: URL(fileURLWithPath: keys))
        return try CredentialKeyring(parsing: newEntry)
    }

    /// A request that failed `client_misconfigured` keeps its credential for `requeue`, and a
    /// running one's is its worker's to finish with: both are re-sealed, and both still work after.
    @Test func rotatingReSealsARequestKeptForRequeueAndARunningOne() async throws {
        try await RevokerTestStack.with { stack in
            var secrets: [UUID: String] = [:]
            for reference in ["a", "b", "c"] {
                let enqueued = try await stack.enqueue(clientID: Self.notes, reference: reference, kind: .refreshToken)
                secrets[enqueued.request.id] = enqueued.secret
            }
            // One ends `client_misconfigured` (kept for requeue), one stays running, one waits.
            let failed = try #require(try await stack.queue.claim(batch: 1, lease: .seconds(300), owner: "w").first)
            let ended = try await stack.queue.finish(
                failed.lease,
                state: .failed,
                outcome: .clientMisconfigured,
                error: ErrorDetail(code: "invalid_client")
            )
            #expect(ended)
            let running = try #require(try await stack.queue.claim(batch: 1, lease: .seconds(300), owner: "w").first)
            let waiting = try #require(secrets.keys.first { $0 != failed.request.id && $0 != running.request.id })

            let k2 = try Self.appendKey(stack)
            let rotated = try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            #expect(rotated.status == 0, "\(rotated.stdout) \(rotated.stderr)")
            #expect(rotated.stdout.contains("Re-sealed 0 held grants and 3 requests under k2."), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("No row is sealed under k1 any more"), "\(rotated.stdout)")
            #expect(!rotated.stdout.contains("held by a worker") && !rotated.stdout.contains("locked"), "\(rotated.stdout)")
            let usage = try await RevokerProcess.run(["keys", "usage"], environment: stack.environment)
            #expect(usage.stdout == "k2 (current): 0 held grants, 3 requests\n", "\(usage.stdout)")

            // The running request's worker still finishes it: its lease was not disturbed.
            let finished = try await stack.queue.finish(running.lease, state: .succeeded, outcome: .revoked)
            #expect(finished)
            // With k1 gone, the failed request is requeued and both waiting credentials open.
            let onlyK2 = RevocationQueue(client: stack.database.client, sealer: CredentialSealer(keyring: k2), logger: stack.logger)
            let requeued = try await onlyK2.requeueConfigurationFailures(clientID: Self.notes, actor: "ops")
            #expect(requeued == 1)
            let reclaimed = try await onlyK2.claim(batch: 10, lease: .seconds(60), owner: "w2")
            let expected = Set([failed.request.id, waiting].compactMap { secrets[$0] })
            #expect(expected.count == 2 && Set(reclaimed.map(\.credential.secret)) == expected)
            for result in [rotated, usage] { try stack.expectNoSecrets(in: result.stdout + result.stderr) }
        }
    }

    /// The guard kept: a row another transaction holds locked (a worker's claim or finish) is
    /// left alone and reported as locked (exit 3); once free, a second run re-seals it.
    @Test func aRowLockedByAWorkerIsPassedOverAndReportedAsLocked() async throws {
        try await RevokerTestStack.with { stack in
            let held = try await stack.enqueue(clientID: Self.notes, reference: "held", kind: .refreshToken)
            try await stack.enqueue(clientID: Self.notes, reference: "free", kind: .refreshToken)
            _ = try Self.appendKey(stack)
            let rotated = try await stack.database.client.withTransaction(logger: stack.logger) { connection in
                _ = try await connection.query(
                    "SELECT id FROM revoker.revocation_requests WHERE id = \(held.request.id) FOR UPDATE",
                    logger: stack.logger
                ).collect()
                return try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            }
            #expect(rotated.status == 3, "\(rotated.stdout) \(rotated.stderr)")
            #expect(rotated.stdout.contains("Re-sealed 0 held grants and 1 requests under k2."), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("1 rows are still under older keys:"), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("  1 locked by a worker when this run last looked"), "\(rotated.stdout)")
            #expect(!rotated.stdout.contains("cannot be opened"), "\(rotated.stdout)")
            #expect(try await Self.keyIDs(stack, "revocation_requests")[held.request.id] == "k1")

            let again = try await RevokerProcess.run(["keys", "rotate"], environment: stack.environment)
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            #expect(again.stdout.contains("Re-sealed 0 held grants and 1 requests under k2."), "\(again.stdout)")
            for result in [rotated, again] { try stack.expectNoSecrets(in: result.stdout + result.stderr) }
        }
    }

    /// Rows that cannot be opened (damaged bytes, a key id replaced by one no keys file holds)
    /// are named by id and passed over; every other row is re-sealed, and a run ends however
    /// small its batches (exit 4 while they remain).
    @Test func unreadableRowsAreNamedByIDAndEveryOtherRowIsReSealed() async throws {
        try await RevokerTestStack.with { stack in
            let grants = try await stack.hold(
                (0..<300).map { ("r-\($0)", "u-\($0)", "rt-\($0)-\(UUID().uuidString)") },
                clientID: Self.notes
            )
            var requests: [UUID] = []
            for index in 0..<20 {
                requests.append(try await stack.enqueue(clientID: Self.notes, reference: "p-\(index)", kind: .refreshToken).request.id)
            }
            // Damaged in the middle of the id order, so later batches follow them.
            let sortedGrants = grants.sorted { $0.uuidString.lowercased() < $1.uuidString.lowercased() }
            let (damaged, relabelled, damagedRequest) = (sortedGrants[120], sortedGrants[121], requests[7])
            let client = stack.database.client
            try await client.query(
                "UPDATE revoker.grants SET sealed_token = set_byte(sealed_token, 20, get_byte(sealed_token, 20) # 1) WHERE id = \(damaged)",
                logger: stack.logger
            )
            try await client.query("UPDATE revoker.grants SET token_key_id = 'k-lost' WHERE id = \(relabelled)", logger: stack.logger)
            try await client.query(
                "UPDATE revoker.revocation_requests SET sealed_credential = '\\x01deadbeef'::bytea WHERE id = \(damagedRequest)",
                logger: stack.logger
            )
            let sealedBefore = try await Self.sealedBytes(stack, [damaged, relabelled], damagedRequest)

            let k2 = try Self.appendKey(stack)
            let rotated = try await RevokerProcess.run(["keys", "rotate", "--batch-size", "50"], environment: stack.environment)
            #expect(rotated.status == 4, "\(rotated.stdout) \(rotated.stderr)")
            #expect(rotated.stdout.contains("Re-sealed 298 held grants and 19 requests under k2."), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("k2 (current): 298 held grants, 19 requests\n"), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("k1: 1 held grants, 1 requests\n"), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("k-lost: 1 held grants, 0 requests\n"), "\(rotated.stdout)")
            #expect(rotated.stdout.contains("3 rows are still under older keys:\n  3 cannot be opened, left as they are:"), "\(rotated.stdout)")
            for (table, id) in [("grant", damaged), ("grant", relabelled), ("request", damagedRequest)] {
                #expect(rotated.stdout.contains("    \(table) \(id.uuidString.lowercased()): "), "\(table) \(id): \(rotated.stdout)")
            }
            #expect(rotated.stdout.contains("sealed with key id 'k-lost', which the keyring does not hold"), "\(rotated.stdout)")
            #expect(rotated.stderr.contains("1 rows are sealed under key k-lost, which the sealing keys file lacks"), "\(rotated.stderr)")
            #expect(!rotated.stdout.contains("locked by a worker"), "\(rotated.stdout)")

            // Every other row opens under k2 alone; the unreadable ones are as they were.
            let sealer = CredentialSealer(keyring: k2)
            let grantRows = try await client.query(
                "SELECT id, sealed_token, token_key_id FROM revoker.grants WHERE sealed_token IS NOT NULL",
                logger: stack.logger
            ).collect()
            var opened = 0
            for row in grantRows {
                let (id, bytes, keyID) = try row.decode((UUID, ByteBuffer, String).self)
                guard id != damaged, id != relabelled else { continue }
                #expect(keyID == "k2")
                _ = try sealer.open(SealedCredential(keyID: keyID, bytes: Array(bytes.readableBytesView)), grantID: id, kind: .refreshToken)
                opened += 1
            }
            #expect(opened == 298)
            #expect(try await Self.sealedBytes(stack, [damaged, relabelled], damagedRequest) == sealedBefore)

            // Batches of one: the unreadable rows are each looked at once and the run ends.
            let again = try await RevokerProcess.run(["keys", "rotate", "--batch-size", "1"], environment: stack.environment)
            #expect(again.status == 4, "\(again.stdout) \(again.stderr)")
            #expect(again.stdout.contains("Re-sealed 0 held grants and 0 requests under k2."), "\(again.stdout)")
            #expect(again.stdout.contains("3 rows are still under older keys:\n  3 cannot be opened, left as they are:"), "\(again.stdout)")
            for result in [rotated, again] {
                try stack.expectNoSecrets(in: result.stdout + result.stderr)
                for bytes in sealedBefore {
                    let hex = bytes.map { String(format: "%02x", $0) }.joined()
                    #expect(
                        !(result.stdout + result.stderr).contains(hex) && !(result.stdout + result.stderr).contains(Data(bytes).base64EncodedString())
                    )
                }
            }
        }
    }

    /// Each row's key id in `table`, by id.
    static func keyIDs(_ stack: RevokerTestStack, _ table: String) async throws -> [UUID: String] {
        let column = table == "grants" ? "token_key_id" : "credential_key_id"
        let rows = try await stack.database.client.query(
            "SELECT id, \(unescaped: column) FROM revoker.\(unescaped: table) WHERE \(unescaped: column) IS NOT NULL",
            logger: stack.logger
        ).collect()
        var result: [UUID: String] = [:]
        for row in rows {
            let (id, keyID) = try row.decode((UUID, String).self)
            result[id] = keyID
        }
        return result
    }

    /// The stored sealed bytes of `grants` and of `request`, in that order.
    static func sealedBytes(_ stack: RevokerTestStack, _ grants: [UUID], _ request: UUID) async throws -> [[UInt8]] {
        var result: [[UInt8]] = []
        for id in grants {
            let rows = try await stack.database.client.query("SELECT sealed_token FROM revoker.grants WHERE id = \(id)", logger: stack.logger)
                .collect()
            result.append(Array(try #require(rows.first).decode(ByteBuffer.self).readableBytesView))
        }
        let rows = try await stack.database.client.query(
            "SELECT sealed_credential FROM revoker.revocation_requests WHERE id = \(request)",
            logger: stack.logger
        ).collect()
        result.append(Array(try #require(rows.first).decode(ByteBuffer.self).readableBytesView))
        return result
    }
}
