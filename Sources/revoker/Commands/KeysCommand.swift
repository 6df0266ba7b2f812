import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerStore

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "The credential sealing keys: which keys seal stored rows, and re-sealing them under the current key.",
        discussion: """
            Rotating a sealing key, with workers running throughout:
              1. append a new key to the sealing keys file (`revoker keygen >> FILE`): the last line is current;
              2. restart the workers and API servers, so they seal with it;
              3. `revoker keys rotate` re-seals every held grant and request (in any state) still under an older key;
              4. once `revoker keys usage` (or `revoker check`) shows no row under the old key, remove its line.
            """,
        subcommands: [KeysUsageCommand.self, KeysRotateCommand.self]
    )

    /// One line per key: the rows it seals.
    static func describe(_ usage: CredentialRotation.Usage, current: String) -> String {
        guard !usage.keyIDs.isEmpty else { return "No stored row is sealed.\n" }
        return usage.keyIDs.map { key in
            "\(key)\(key == current ? " (current)" : ""): \(usage.grants[key] ?? 0) held grants, \(usage.requests[key] ?? 0) requests\n"
        }.joined()
    }
}

struct KeysUsageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "usage", abstract: "How many stored rows each sealing key seals.")

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: [.database, .keyring])
        let logger = CommandLogging.logger(label: "revoker.keys", level: options.logLevel)
        let usage = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            try await CredentialRotation(client: client, sealer: configuration.sealer, logger: logger).usage()
        }
        print(KeysCommand.describe(usage, current: configuration.keyring.currentKeyID), terminator: "")
    }
}

struct KeysRotateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Re-seal every held grant and request still under an older sealing key, online, in batches.",
        discussion: """
            Every row that holds a sealed credential is re-sealed, whatever its state (a failed request kept for \
            `requeue` too). Each batch is one short transaction that locks its rows as a worker's claim does, passing \
            over rows another transaction holds locked; a row is replaced only if it still holds what was opened. A row \
            that cannot be opened (damaged bytes, a key id the sealing keys file lacks, a failed authentication) is \
            left as it is and named by its grant or request id on standard output; the others are re-sealed all the \
            same. Safe to stop at any time and to run again (it continues with what is left). Progress goes to \
            standard error.

            Exit codes: 0 nothing is left under an older key; 2 could not run; 3 rows are still under an older key \
            because a worker held them locked, or a process sealed them since with an older key (run it again); 4 \
            some rows under an older key cannot be opened (each named by id; all the others were re-sealed).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("batch-size"), help: ArgumentHelp("Rows per transaction (default 500).", valueName: "n"))
    var batchSize = 500

    func validate() throws {
        guard (1...10_000).contains(batchSize) else { throw fail("--batch-size must be between 1 and 10000.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: [.database, .keyring])
        let logger = CommandLogging.logger(label: "revoker.keys", level: options.logLevel)
        let current = configuration.keyring.currentKeyID
        let summary = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { [batchSize] client in
            let stderr = FileHandle.standardError
            let rotation = CredentialRotation(client: client, sealer: configuration.sealer, logger: logger)
            let before = try await rotation.usage()
            // Rows under a key the file lacks cannot be opened: said now, reported by id below.
            for missing in before.keyIDs where !configuration.keyring.keyIDs.contains(missing) {
                let rows = (before.grants[missing] ?? 0) + (before.requests[missing] ?? 0)
                stderr.write(
                    Data(
                        "revoker: \(rows) rows are sealed under key \(missing), which the sealing keys file lacks: they cannot be re-sealed until it is added back.\n"
                            .utf8
                    )
                )
            }
            stderr.write(Data("revoker: \(before.rows(notUnder: current)) rows to re-seal under \(current).\n".utf8))
            var done = (grants: 0, requests: 0)
            do {
                return try await rotation.resealAll(batchSize: batchSize) { batch in
                    done.grants += batch.grants
                    done.requests += batch.requests
                    for row in batch.unreadable {
                        stderr.write(Data("revoker: passing over \(row.table.rawValue) \(row.id.uuidString.lowercased()): \(row.reason).\n".utf8))
                    }
                    if batch.total > 0 {
                        stderr.write(Data("revoker: re-sealed \(done.grants) grants and \(done.requests) requests.\n".utf8))
                    }
                }
            } catch let error as RevokerStoreError {
                throw fail("Re-sealing stopped: \(error.message). What was re-sealed stays; run it again to continue.")
            }
        }
        print("Re-sealed \(summary.grants) held grants and \(summary.requests) requests under \(current).")
        print(KeysCommand.describe(summary.usage, current: current), terminator: "")
        let left = summary.usage.rows(notUnder: current)
        if left == 0 {
            let old = configuration.keyring.keyIDs.filter { $0 != current }
            if !old.isEmpty { print("No row is sealed under \(old.joined(separator: ", ")) any more: those keys may be removed.") }
            return
        }
        print(Self.remainder(summary, left: left))
        throw summary.unreadable.isEmpty ? Exit.incomplete : Exit.unreadable
    }

    /// What is still under older keys, and why: each unreadable row by id, the locked ones, and
    /// any sealed since the run passed (a process still sealing with an older key).
    static func remainder(_ summary: CredentialRotation.Summary, left: Int) -> String {
        var lines = ["\(left) rows are still under older keys:"]
        if !summary.unreadable.isEmpty {
            lines.append("  \(summary.unreadable.count) cannot be opened, left as they are:")
            for row in summary.unreadable {
                lines.append("    \(row.table.rawValue) \(row.id.uuidString.lowercased()): \(row.reason)")
            }
        }
        if summary.locked > 0 {
            lines.append("  \(summary.locked) locked by a worker when this run last looked: run `revoker keys rotate` again.")
        }
        let since = left - summary.unreadable.count - summary.locked
        if since > 0 {
            lines.append(
                "  \(since) freed by a worker, or sealed under an older key by a process not yet restarted, after this run passed them: run `revoker keys rotate` again."
            )
        }
        return lines.joined(separator: "\n")
    }
}
