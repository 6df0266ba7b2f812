import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerProvider
import RevokerStore
import Testing

@testable import RevokerLocalStack
@testable import RevokerTesting

/// The audit trail tampered with by the database's owner, in each way a security review did
/// it, and `revoker audit verify` naming what was done.
@Suite("revoker audit verify", .serialized)
struct AuditVerifyCommandTests {
    enum Tamper: String, CaseIterable, CustomTestStringConvertible {
        case updatedWithTriggersDisabled, updatedAndRehashed, deletedAsReplica, forgedBackdatedInsert, wholeRequestRemoved, truncated
        var testDescription: String { rawValue }
    }

    struct Problem: Decodable {
        var kind: String
        var message: String
        var rows: [Int64]
        var chain: String?
    }

    struct Report: Decodable {
        var intact: Bool
        var problems: [Problem]
        var rowsNotYetCheckpointed: Int
        enum CodingKeys: String, CodingKey {
            case intact, problems
            case rowsNotYetCheckpointed = "rows_not_yet_checkpointed"
        }
    }

    static func verify(_ environment: [String: String], _ arguments: [String] = []) async throws -> (RevokerProcess.Result, Report?) {
        let result = try await RevokerProcess.run(["audit", "verify", "--json"] + arguments, environment: environment)
        return (result, try? JSONDecoder().decode(Report.self, from: Data(result.stdout.utf8)))
    }

    /// Four revocations run against the sandbox, every row under a checkpoint.
    static func withTrail<T: Sendable>(_ body: (RevokerTestStack, [String: String]) async throws -> T) async throws -> T {
        try await RevokerTestStack.with(apps: [.apple: ["com.example.notes"]]) { stack in
            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "user-", count: 4)
            _ = try await stack.drain()
            let environment = stack.files.environment(databaseURL: stack.database.url, sandbox: stack.sandbox)
            try await eventually("every row inside a checkpoint", every: .milliseconds(300)) {
                let checkpoint = try await RevokerProcess.run(["audit", "checkpoint"], environment: environment)
                #expect(checkpoint.status == 0, "\(checkpoint.stderr)")
                let (result, report) = try await verify(environment)
                #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
                let clean = try #require(report)
                #expect(clean.intact)
                return clean.rowsNotYetCheckpointed == 0
            }
            return try await body(stack, environment)
        }
    }

    static func one<T: PostgresDecodable>(_ sql: String, _ stack: RevokerTestStack, as type: T.Type) async throws -> T {
        let rows = try await stack.database.client.query(PostgresQuery(unsafeSQL: sql)).collect()
        return try #require(try rows.first?.decode(T.self))
    }

    /// Runs `statements` as the database's owner in one transaction.
    static func tamper(_ stack: RevokerTestStack, _ statements: [String]) async throws {
        try await stack.database.client.withTransaction(logger: Logger(label: "tamper")) { connection in
            for sql in statements { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "tamper")).collect() }
        }
    }

    @Test("each way of tampering is named", arguments: Tamper.allCases)
    func eachTamperingIsNamed(_ tamper: Tamper) async throws {
        try await Self.withTrail { stack, environment in
            let revoked = try await Self.one("SELECT id FROM revoker.audit_events WHERE event = 'revoked' ORDER BY id LIMIT 1", stack, as: Int64.self)
            let chain = try await Self.one("SELECT chain_key FROM revoker.audit_events WHERE id = \(revoked)", stack, as: String.self)
            let claimed = try await Self.one(
                "SELECT id FROM revoker.audit_events WHERE chain_key = '\(chain)' AND event = 'claimed' ORDER BY chain_seq LIMIT 1",
                stack,
                as: Int64.self
            )
            let claimedSeq = try await Self.one("SELECT chain_seq FROM revoker.audit_events WHERE id = \(claimed)", stack, as: Int64.self)
            let forged: Int64 = 9_000_001
            switch tamper {
            case .updatedWithTriggersDisabled:
                try await Self.tamper(
                    stack,
                    [
                        "ALTER TABLE revoker.audit_events DISABLE TRIGGER USER",
                        "UPDATE revoker.audit_events SET http_status = 400, apple_error = 'invalid_grant' WHERE id = \(revoked)",
                        "ALTER TABLE revoker.audit_events ENABLE TRIGGER USER",
                    ]
                )
            case .updatedAndRehashed:
                // Hiding the change from the row's own hash: the chain and the checkpoint still tell.
                try await Self.tamper(
                    stack,
                    [
                        "SET LOCAL session_replication_role = replica",
                        "UPDATE revoker.audit_events SET http_status = 400, apple_error = 'invalid_grant' WHERE id = \(revoked)",
                        "UPDATE revoker.audit_events e SET hash = revoker.audit_row_hash(e.prev_hash, e) WHERE id = \(revoked)",
                    ]
                )
            case .deletedAsReplica:
                try await Self.tamper(
                    stack,
                    ["SET LOCAL session_replication_role = replica", "DELETE FROM revoker.audit_events WHERE id = \(claimed)"]
                )
            case .forgedBackdatedInsert:
                // A careful forger: the right chain position, the previous hash, a hash computed
                // the database's own way, a current transaction id, a time 40 days ago (in a
                // partition the owner adds for that month).
                try await Self.tamper(
                    stack,
                    [
                        "SET LOCAL session_replication_role = replica",
                        "SELECT revoker.audit_add_partitions(now() - interval '40 days', now())",
                        """
                        INSERT INTO revoker.audit_events (id, occurred_at, request_id, client_id, external_reference, event, actor,
                            recorded_by, chain_key, chain_seq, prev_hash, hash, txid)
                        SELECT \(forged), now() - interval '40 days', request_id, client_id, external_reference, 'cancelled', 'ops',
                               recorded_by, chain_key, chain_seq + 1, hash, hash, pg_current_xact_id()
                        FROM revoker.audit_events WHERE chain_key = '\(chain)' ORDER BY chain_seq DESC LIMIT 1
                        """,
                        "UPDATE revoker.audit_events e SET hash = revoker.audit_row_hash(e.prev_hash, e) WHERE id = \(forged)",
                    ]
                )
            case .wholeRequestRemoved:
                try await Self.tamper(
                    stack,
                    ["SET LOCAL session_replication_role = replica", "DELETE FROM revoker.audit_events WHERE chain_key = '\(chain)'"]
                )
            case .truncated:
                try await Self.tamper(stack, ["SET LOCAL session_replication_role = replica", "TRUNCATE revoker.audit_events"])
            }

            let (result, parsed) = try await Self.verify(environment)
            #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
            let report = try #require(parsed, "\(result.stdout)")
            #expect(!report.intact)
            let kinds = Set(report.problems.map(\.kind))
            func named(_ kind: String, row: Int64? = nil, chain expected: String? = nil) -> Bool {
                report.problems.contains { problem in
                    problem.kind == kind && (row.map { problem.rows.contains($0) } ?? true)
                        && (expected.map { problem.chain == $0 } ?? true)
                }
            }
            switch tamper {
            case .updatedWithTriggersDisabled:
                #expect(named("changed", row: revoked, chain: chain), "\(report.problems)")
            case .updatedAndRehashed:
                #expect(!named("changed", row: revoked), "\(report.problems)")
                let next = report.problems.contains { $0.kind == "inserted" && $0.chain == chain }
                let head = report.problems.contains { $0.kind == "changed" && $0.chain == chain }
                #expect(next || head, "\(report.problems)")
                #expect(kinds.contains("checkpoint_mismatch"))
            case .deletedAsReplica:
                #expect(
                    report.problems.contains { $0.kind == "removed" && $0.chain == chain && $0.message.contains("#\(claimedSeq)…#\(claimedSeq)") },
                    "\(report.problems)"
                )
                #expect(kinds.contains("checkpoint_mismatch"))
            case .forgedBackdatedInsert:
                // Appended at the chain's end in a new transaction, it links like a real row;
                // its time before a checkpoint that does not cover it gives it away.
                #expect(named("reordered", row: forged), "\(report.problems)")
            case .wholeRequestRemoved:
                #expect(report.problems.contains { $0.kind == "removed" && $0.chain == chain && $0.message.contains("all") }, "\(report.problems)")
                #expect(kinds.contains("checkpoint_mismatch"))
            case .truncated:
                let chains = try await Self.one("SELECT count(*)::int FROM revoker.audit_chains", stack, as: Int.self)
                #expect(report.problems.filter { $0.kind == "removed" }.count == chains, "\(report.problems)")
                #expect(kinds.contains("checkpoint_mismatch"))
            }
            // The text form leads with the verdict and names the same rows.
            let text = try await RevokerProcess.run(["audit", "verify"], environment: environment)
            #expect(text.status == 1)
            #expect(text.stdout.hasPrefix("Audit trail: TAMPERED"), "\(text.stdout)")
            #expect(text.stdout.contains(chain) || tamper == .truncated || tamper == .forgedBackdatedInsert)
        }
    }

    @Test func anAuditorChecksWithThePublicKeyAloneAndAnotherKeyIsNotEnough() async throws {
        try await Self.withTrail { stack, environment in
            let published = try await RevokerProcess.run(["audit", "public-key"], environment: environment)
            #expect(published.status == 0)
            #expect(published.stdout.hasPrefix("-----BEGIN PUBLIC KEY-----"))
            #expect(!published.stdout.contains("PRIVATE"))
            let keyFile = stack.files.directory.appendingPathComponent("audit-public-key.pem").path
            try Data(published.stdout.utf8).write(to: URL(fileURLWithPath: keyFile))
            // No configuration file: only the database and the public key.
            let auditor = ["DATABASE_URL": stack.database.url]
            let (good, report) = try await Self.verify(auditor, ["--public-key", keyFile])
            #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
            #expect(report?.intact == true)

            let otherFile = stack.files.directory.appendingPathComponent("other-public-key.pem").path
            try Data(AuditSigningKey().publicKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherFile))
            let (other, otherReport) = try await Self.verify(auditor, ["--public-key", otherFile])
            #expect(other.status == 2, "\(other.stdout)")
            #expect(otherReport?.problems.allSatisfy { $0.kind == "unknown_key" } == true)

            let bad = try await RevokerProcess.run(["audit", "verify", "--public-key", "/nonexistent.pem"], environment: auditor)
            #expect(bad.status == 2)
            #expect(bad.stderr.contains("/nonexistent.pem"))
        }
    }

    @Test func aReceiptIsIssuedForOneRequestAndVerifiesOfflineUntilAByteChanges() async throws {
        try await Self.withTrail { stack, environment in
            let directory = stack.files.directory
            let publicKey = try await RevokerProcess.run(["audit", "public-key"], environment: environment)
            let keyFile = directory.appendingPathComponent("audit-public-key.pem").path
            try Data(publicKey.stdout.utf8).write(to: URL(fileURLWithPath: keyFile))

            let issued = try await RevokerProcess.run(["audit", "receipt", "--reference", "user-1"], environment: environment)
            #expect(issued.status == 0, "\(issued.stderr)")
            let receiptFile = directory.appendingPathComponent("receipt.json")
            try Data(issued.stdout.utf8).write(to: receiptFile)
            let receipt = try JSONDecoder().decode(AuditReceipt.self, from: Data(issued.stdout.utf8))
            #expect(receipt.summary.externalReference == "user-1")
            #expect(receipt.summary.outcome == "revoked")
            #expect(receipt.summary.appleCalls.contains { $0.endpoint == "/auth/revoke" && $0.httpStatus == 200 })
            #expect(receipt.events.first?.row.event == "enqueued")

            // Offline: no database, no configuration, only the public key.
            let offline = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
            let good = try await RevokerProcess.run(["audit", "verify-receipt", receiptFile.path, "--public-key", keyFile], environment: offline)
            #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
            #expect(good.stdout.hasPrefix("Receipt valid"))

            var bytes = Data(issued.stdout.utf8)
            let outcome = try #require(bytes.range(of: Data("\"outcome\" : \"revoked\"".utf8)))
            bytes[outcome.upperBound - 2] = UInt8(ascii: "D")
            try bytes.write(to: receiptFile)
            let bad = try await RevokerProcess.run(["audit", "verify-receipt", receiptFile.path, "--public-key", keyFile], environment: offline)
            #expect(bad.status == 1, "\(bad.stdout)")
            #expect(bad.stdout.contains("NOT valid") && bad.stdout.contains("summary"), "\(bad.stdout)")

            let page = try await RevokerProcess.run(["audit", "receipt", "--reference", "user-1", "--html"], environment: environment)
            #expect(page.status == 0)
            #expect(page.stdout.hasPrefix("<!doctype html>") && page.stdout.contains("user-1") && page.stdout.contains("/auth/revoke"))

            let unknown = try await RevokerProcess.run(["audit", "receipt", UUID().uuidString], environment: environment)
            #expect(unknown.status == 2)
            #expect(unknown.stderr.contains("no request"))
            let neither = try await RevokerProcess.run(["audit", "receipt"], environment: environment)
            #expect(neither.status != 0)
        }
    }

    /// docs/audit.md's daily routine: verify against the checkpoints kept the day before, keep the
    /// newest. It finds the newest checkpoints removed with their rows, and a receipt issued over
    /// a rewritten history signed again, both of which verify without a witness.
    @Test func theAuditorsDailyRoutineFindsWhatOnlyAWitnessCanFind() async throws {
        try await Self.withTrail { stack, environment in
            let directory = stack.files.directory
            let publicKey = try await RevokerProcess.run(["audit", "public-key"], environment: environment)
            let keyFile = directory.appendingPathComponent("audit-public-key.pem").path
            try Data(publicKey.stdout.utf8).write(to: URL(fileURLWithPath: keyFile))
            let kept = directory.appendingPathComponent("kept").path
            try FileManager.default.createDirectory(atPath: kept, withIntermediateDirectories: true)
            let auditor = ["DATABASE_URL": stack.database.url]
            let routine = ["--public-key", keyFile, "--witness", kept, "--keep-witness", kept]

            let (day1, report1) = try await Self.verify(auditor, routine)
            #expect(day1.status == 0 && report1?.intact == true, "\(day1.stdout) \(day1.stderr)")
            let first = try #require(try AuditWitness.read(kept).last)
            let issued = try await RevokerProcess.run(["audit", "receipt", "--reference", "user-1"], environment: environment)
            let receiptFile = directory.appendingPathComponent("receipt.json").path
            try Data(issued.stdout.utf8).write(to: URL(fileURLWithPath: receiptFile))
            let offline = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
            let receiptCheck = ["audit", "verify-receipt", receiptFile, "--public-key", keyFile]
            #expect(try await RevokerProcess.run(receiptCheck + ["--witness", kept], environment: offline).status == 0)

            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "late-", count: 1)
            #expect(try await RevokerProcess.run(["audit", "checkpoint"], environment: environment).status == 0)
            let (day2, _) = try await Self.verify(auditor, routine)
            #expect(day2.status == 0, "\(day2.stdout)")
            let second = try #require(try AuditWitness.read(kept).last)
            #expect(second.seq > first.seq)

            // The newest checkpoint removed with every row after the one before it.
            let before = try #require(try await AuditCheckpoints(client: stack.database.client, logger: stack.logger).all().dropLast().last)
            try await Self.tamper(
                stack,
                [
                    "SET LOCAL session_replication_role = replica",
                    "DELETE FROM revoker.audit_events WHERE txid >= '\(before.txidTo)'::xid8",
                    "DELETE FROM revoker.audit_checkpoints WHERE seq > \(before.seq)",
                    "DELETE FROM revoker.audit_chains c WHERE NOT EXISTS (SELECT 1 FROM revoker.audit_events e WHERE e.chain_key = c.chain_key)",
                ]
            )
            let (blind, _) = try await Self.verify(auditor, ["--public-key", keyFile])
            #expect(blind.status == 0, "without a witness the shorter trail verifies: \(blind.stdout)")
            let (day3, report3) = try await Self.verify(auditor, routine)
            #expect(day3.status == 1)
            #expect(report3?.problems.contains { $0.kind == "witness_mismatch" } == true, "\(day3.stdout)")

            // Every checkpoint removed, a request's rows rewritten, the trail signed again by a
            // signer that keeps no witness: the new receipt verifies, but not against the witness.
            let chain = try await Self.one(
                "SELECT request_id::text FROM revoker.audit_events WHERE external_reference = 'user-1' LIMIT 1",
                stack,
                as: String.self
            )
            try await Self.tamper(
                stack,
                [
                    "SET LOCAL session_replication_role = replica",
                    "DELETE FROM revoker.audit_checkpoints",
                    "UPDATE revoker.audit_events SET detail = 'outcome=already_invalid' WHERE chain_key = '\(chain)' AND event = 'succeeded'",
                    AuditTampering.rehashChain(chain),
                ]
            )
            let reissued = try await RevokerProcess.run(["audit", "receipt", "--reference", "user-1"], environment: environment)
            #expect(reissued.status == 0, "\(reissued.stderr)")
            try Data(reissued.stdout.utf8).write(to: URL(fileURLWithPath: receiptFile))
            #expect(try await RevokerProcess.run(receiptCheck, environment: offline).status == 0)
            let witnessed = try await RevokerProcess.run(receiptCheck + ["--witness", kept], environment: offline)
            #expect(witnessed.status == 1)
            #expect(witnessed.stdout.contains("not the one the witness holds"), "\(witnessed.stdout)")
        }
    }
}
