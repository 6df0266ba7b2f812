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

            The file's extent (its months, counts, first and last row and checkpoint, chain starts) is signed \
            with the audit signing key ("audit.signing_key_file"), and its first and last checkpoint are \
            recorded with the archive. Rows not yet under a checkpoint, the current month, and rows committed \
            into the months after they were read are refused. Run it with the schema owner's database URL (as \
            `revoker migrate`): only the owner may drop a partition.

            Example:
              revoker audit archive --before 2026-01 --out audit-before-2026-01.jsonl.gz
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("before"), help: ArgumentHelp("The first month kept (YYYY-MM): every month before it is archived.", valueName: "month"))
    var before: String
    static let notAMonth = "--before must be a month, YYYY-MM (e.g. 2026-01)."

    @Option(name: .customLong("out"), help: ArgumentHelp("The archive file to write (must not exist).", valueName: "file"))
    var out: String

    func validate() throws {
        guard AuditArchiver.month(before) != nil else { throw ValidationError(Self.notAMonth) }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let key = try auditSigningKey(configuration)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        guard let before = AuditArchiver.month(self.before) else { throw ValidationError(Self.notAMonth) }
        let out = self.out
        let result = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            do {
                return try await AuditArchiver(client: client, key: key, logger: logger).archive(before: before, to: out) { message in
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

struct AuditVerifyArchiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-archive",
        abstract: "Check an audit archive offline: every row's hash and chain, every checkpoint's signature and Merkle root.",
        discussion: """
            Needs no database: only the file and the audit public key. Any row changed, removed, added or \
            reordered, a checkpoint not signed by a key given, a file cut short, or an extent (what the file \
            says it holds: months, counts, first and last checkpoint, chain starts) not signed or not what the \
            file holds is named. With --with-database it also holds the file against what the live trail \
            recorded when it dropped the months: the file's SHA-256, counts, and first and last checkpoint.

            Files written before extents were signed (format revoker.audit.archive.v1) are checked as before \
            but not taken as whole: a cut at a checkpoint would not show. With --with-database, such a file \
            whose SHA-256 is the one the trail recorded is valid.
            Exit status: 0 valid, 1 not valid (or an unsigned extent), 2 could not run.

            Examples:
              revoker audit verify-archive audit-before-2026-01.jsonl.gz --public-key audit-public-key.pem
              revoker audit verify-archive audit-before-2026-01.jsonl.gz --public-key audit-public-key.pem --with-database
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The archive file.", valueName: "file"))
    var file: String

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    @Flag(name: .customLong("with-database"), help: "Also hold the file against what the live trail recorded of it.")
    var checkDatabase = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: checkDatabase ? .database : [])
        let keys = try auditKeys(configuration, files: publicKeys)
        guard !keys.isEmpty else { throw fail("No public key: pass --public-key FILE (from `revoker audit public-key`).") }
        var result: AuditArchive.Verification
        let sha256: [UInt8]
        do {
            result = try AuditArchive.verify(path: file, keys: keys)
            sha256 = try AuditArchive.sha256(path: file)
        } catch {
            print("Archive NOT valid: \(error)")
            throw Exit.someFailed
        }
        // An unsigned extent is whole only when the trail recorded exactly these bytes.
        var recorded = false
        if checkDatabase {
            let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
            let found = result
            let problems = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
                try await AuditArchiveRecords(client: client, logger: logger).problems(of: found, sha256: sha256)
            }
            result.problems += problems
            recorded = problems.isEmpty
        }
        if result.valid, result.unsignedExtent, !recorded {
            print(
                "Archive NOT proven whole: its format, \(AuditArchive.unsignedExtentFormat), does not sign its extent (months, counts, "
                    + "first and last checkpoint, chain starts), so a cut at a checkpoint would not show; its \(result.rows) rows, "
                    + "\(result.chains) chains and \(result.checkpoints) checkpoints check. Run it with --with-database: the trail "
                    + "recorded the SHA-256 of the file written."
            )
            throw Exit.someFailed
        }
        if result.valid {
            print(
                "Archive valid: \(result.rows) audit rows in \(result.chains) chains of \(result.months.joined(separator: ", ")), "
                    + "\(result.checkpoints) signed checkpoints"
                    + (result.unsignedExtent ? ", extent unsigned (\(AuditArchive.unsignedExtentFormat))" : ", extent signed")
                    + (checkDatabase ? "; the file the trail recorded" : "")
            )
            return
        }
        print("Archive NOT valid:")
        for problem in result.problems.prefix(100) { print("  \(problem)") }
        if result.problems.count > 100 { print("  … and \(result.problems.count - 100) more") }
        throw Exit.someFailed
    }
}
