import Foundation
import PostgresNIO
import RevokerEvidence
import RevokerLocalStack
import RevokerProvider
@_spi(History) import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// docs/audit.md's archive commands, run as printed on a trail whose oldest months are before 2026-01.
@Suite("revoker audit archive")
struct AuditArchiveCommandTests {
    /// docs/audit.md's lines that archive, check the file and issue and check a receipt from it.
    static let archiveCommands = [
        "revoker audit archive --before 2026-01 --out audit-before-2026-01.jsonl.gz",
        "revoker audit verify-archive audit-before-2026-01.jsonl.gz --public-key audit-public-key.pem",
        "revoker audit receipt 0b9c1f3e-8d2a-4c4b-9f1e-2a6d5c7b8e90 --archive audit-before-2026-01.jsonl.gz > archived-receipt.json",
        "revoker audit verify-receipt archived-receipt.json --public-key audit-public-key.pem",
    ]

    @Test func theDocsArchiveMonthsVerifyTheFileAndIssueAReceiptFromIt() async throws {
        let documented = DocumentedCommandTests.commands(in: try Documentation.read("docs/audit.md"))
        for command in Self.archiveCommands { #expect(documented.contains(command), "docs/audit.md shows \(command)") }
        try await RevokerTestStack.with(apps: [.apple: ["com.example.notes"]]) { stack in
            let client = stack.database.client
            let key = try AuditSigningKey(pemRepresentation: String(contentsOfFile: stack.files.auditSigningKeyFile, encoding: .utf8))
            // Two requests of November 2025, one going on in December, then this month's trail.
            _ = try await client.query("SELECT revoker.audit_add_partitions('2025-11-01', '2025-12-01')").collect()
            let archived = UUID(uuidString: "0b9c1f3e-8d2a-4c4b-9f1e-2a6d5c7b8e90")!
            try await client.withTransaction(logger: stack.logger) { connection in
                try await connection.query("SET LOCAL revoker.history_clock = 'on'", logger: stack.logger)
                for (request, times) in [(archived, ["2025-11-03", "2025-11-04", "2025-12-20"]), (UUID(), ["2025-11-10"])] {
                    for (index, time) in times.enumerated() {
                        try await connection.query(
                            """
                            INSERT INTO revoker.audit_events (occurred_at, request_id, client_id, external_reference, event, actor)
                            VALUES (\(time)::timestamptz, \(request), 'com.example.notes', 'user-2025', \(index == 0 ? "enqueued" : "note"), 'ops')
                            """,
                            logger: stack.logger
                        )
                    }
                }
            }
            let signer = try AuditSigner(key: key, trustedKeys: [])
            _ = try #require(
                try await AuditCheckpoints(client: client, logger: stack.logger).take(signer: signer, backdatedTo: AuditArchiver.month("2026-01")!)
            )
            _ = try await stack.enqueueMany(clientID: "com.example.notes", prefix: "user-", count: 2)
            _ = try await stack.drain()

            let work = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-archive-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: work) }
            var environment = stack.environment
            environment["PATH"] =
                URL(fileURLWithPath: RevokerProcess.binary).deletingLastPathComponent().path + ":"
                + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            func sh(_ command: String) async throws -> (status: Int32, output: String) {
                let process = try RevokerProcess.Handle(
                    executable: "/bin/sh",
                    arguments: ["-c", command],
                    environment: environment,
                    workingDirectory: work
                )
                try await eventually("\(command) ends") { !process.isRunning }
                return (process.terminationStatus, process.output + process.errors)
            }
            for command in ["revoker audit checkpoint", "revoker audit public-key > audit-public-key.pem"] + Self.archiveCommands {
                let (status, output) = try await sh(command)
                #expect(status == 0, "\(command): \(output)")
            }
            let receipt = try Data(contentsOf: work.appendingPathComponent("archived-receipt.json"))
            let verified = AuditReceipt.verify(receipt, keys: [key.publicKey])
            #expect(verified.receipt?.events.map(\.row.event) == ["enqueued", "note", "note"])
            // November and December are gone; what is left still verifies, and a changed file does not.
            let months = try await client.query(
                "SELECT count(*)::int FROM pg_inherits WHERE inhparent = 'revoker.audit_events'::regclass AND inhrelid::regclass::text < 'revoker.audit_events_2026_01'"
            ).collect().first?.decode(Int.self)
            #expect(months == 0)
            let (verifyStatus, verifyOutput) = try await sh("revoker audit verify --public-key audit-public-key.pem")
            #expect(verifyStatus == 0, "\(verifyOutput)")
            // The file is the one the trail recorded when it dropped the months.
            let (recordedStatus, recordedOutput) = try await sh(
                "revoker audit verify-archive audit-before-2026-01.jsonl.gz --public-key audit-public-key.pem --with-database"
            )
            #expect(recordedStatus == 0, "\(recordedOutput)")
            #expect(recordedOutput.contains("extent signed; the file the trail recorded"), "\(recordedOutput)")
            let (_, _) = try await sh(
                "gunzip -c audit-before-2026-01.jsonl.gz | sed 's/\"actor\":\"ops\"/\"actor\":\"eve\"/' | gzip > changed.jsonl.gz"
            )
            let (changedStatus, changedOutput) = try await sh("revoker audit verify-archive changed.jsonl.gz --public-key audit-public-key.pem")
            #expect(changedStatus == 1, "\(changedOutput)")
            #expect(changedOutput.contains("NOT valid"))
            let (unrecordedStatus, unrecordedOutput) = try await sh(
                "revoker audit verify-archive changed.jsonl.gz --public-key audit-public-key.pem --with-database"
            )
            #expect(unrecordedStatus == 1, "\(unrecordedOutput)")
            #expect(unrecordedOutput.contains("it is not the file written"), "\(unrecordedOutput)")
        }
    }
}
