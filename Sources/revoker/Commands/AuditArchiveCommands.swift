import ArgumentParser
import Foundation
import RevokerApp
import RevokerEvidence
import RevokerStore

struct AuditArchiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive",
        abstract: "Move the months of the audit trail before a month to a compressed file, then drop them from the database.",
        discussion: """
            Writes every audit row of the months before --before, every checkpoint that covers them (signed) and \
            what each checkpoint's Merkle root needs from outside the file, to a new gzip file; checks the file; \
            and only then, in one transaction, records the archive (file name, SHA-256, where each chain stops) \
            and detaches and drops those months' partitions. The live trail still verifies: its chains go on from \
            the rows the archive recorded. `revoker audit verify-archive` checks the file offline; \
            `revoker audit receipt --archive FILE` issues a receipt from it. Keep the file as long as the rows \
            must be kept: deleting it ends their retention, and the checkpoints left in the database still show \
            that they existed.

            Rows not yet under a checkpoint, and the current month, are refused. Run it with the schema owner's \
            database URL (as `revoker migrate`): only the owner may drop a partition.

            Example:
              revoker audit archive --before 2026-01 --out audit-before-2026-01.jsonl.gz
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("before"), help: ArgumentHelp("The first month kept (YYYY-MM): every month before it is archived.", valueName: "month"))
    var before: String

    @Option(name: .customLong("out"), help: ArgumentHelp("The archive file to write (must not exist).", valueName: "file"))
    var out: String

    func validate() throws {
        guard AuditArchiver.month(before) != nil else { throw ValidationError("--before must be a month, YYYY-MM (e.g. 2026-01).") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let (before, out) = (AuditArchiver.month(self.before)!, self.out)
        let result = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            do {
                return try await AuditArchiver(client: client, logger: logger).archive(before: before, to: out) { message in
                    FileHandle.standardError.write(Data((message + "\n").utf8))
                }
            } catch let error as RevokerStoreError {
                throw fail("Nothing was archived: \(error.message).")
            }
        }
        print(
            "Archived \(result.rows) audit rows in \(result.chains) chains of \(result.months.joined(separator: ", ")) "
                + "under \(result.checkpoints) checkpoints to \(out)\nsha256 \(result.sha256.hex)"
        )
    }
}

struct AuditVerifyArchiveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-archive",
        abstract: "Check an audit archive offline: every row's hash and chain, every checkpoint's signature and Merkle root.",
        discussion: """
            Needs no database: only the file and the audit public key. Any row changed, removed, added or \
            reordered, a checkpoint not signed by a key given, or a file cut short is named.
            Exit status: 0 valid, 1 not valid, 2 could not run.

            Example:
              revoker audit verify-archive audit-before-2026-01.jsonl.gz --public-key audit-public-key.pem
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The archive file.", valueName: "file"))
    var file: String

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    func run() throws {
        let configuration = try loadConfiguration(options, needs: [])
        let keys = try auditKeys(configuration, files: publicKeys)
        guard !keys.isEmpty else { throw fail("No public key: pass --public-key FILE (from `revoker audit public-key`).") }
        let result: AuditArchive.Verification
        do {
            result = try AuditArchive.verify(path: file, keys: keys)
        } catch {
            print("Archive NOT valid: \(error)")
            throw Exit.someFailed
        }
        if result.valid {
            print(
                "Archive valid: \(result.rows) audit rows in \(result.chains) chains of \(result.months.joined(separator: ", ")), "
                    + "\(result.checkpoints) signed checkpoints"
            )
            return
        }
        print("Archive NOT valid:")
        for problem in result.problems.prefix(100) { print("  \(problem)") }
        if result.problems.count > 100 { print("  … and \(result.problems.count - 100) more") }
        throw Exit.someFailed
    }
}
