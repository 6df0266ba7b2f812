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
              3. `revoker keys rotate` re-seals every held grant and waiting request still under an older key;
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
        abstract: "Re-seal every held grant and waiting request under the current sealing key, online, in batches.",
        discussion: """
            Each batch is one short transaction that locks its rows as a worker's claim does, passing over rows a \
            worker holds; a row is replaced only if it still holds what was opened. Safe to stop at any time and to \
            run again (it continues with what is left). Progress goes to standard error.

            Exit codes: 0 nothing is left under an older key; 2 could not run; 3 rows are still under an older key \
            (a worker held them: run it again).
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
        let (total, usage) = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { [batchSize] client in
            let rotation = CredentialRotation(client: client, sealer: configuration.sealer, logger: logger)
            let before = try await rotation.usage()
            if let missing = before.keyIDs.first(where: { !configuration.keyring.keyIDs.contains($0) }) {
                throw fail("Rows are sealed under key \(missing), which the sealing keys file lacks: add it back before rotating.")
            }
            var total = CredentialRotation.Batch()
            let stderr = FileHandle.standardError
            stderr.write(Data("revoker: \(before.rows(notUnder: current)) rows to re-seal under \(current).\n".utf8))
            while true {
                let batch: CredentialRotation.Batch
                do {
                    batch = try await rotation.resealBatch(limit: batchSize)
                } catch let error as RevokerStoreError {
                    throw fail("Re-sealing stopped: \(error.message). What was re-sealed stays; run it again to continue.")
                }
                if batch.total == 0 { break }
                total.grants += batch.grants
                total.requests += batch.requests
                stderr.write(Data("revoker: re-sealed \(total.grants) grants and \(total.requests) requests.\n".utf8))
            }
            return (total, try await rotation.usage())
        }
        print("Re-sealed \(total.grants) held grants and \(total.requests) waiting requests under \(current).")
        print(KeysCommand.describe(usage, current: current), terminator: "")
        let left = usage.rows(notUnder: current)
        if left > 0 {
            print("\(left) rows are still under older keys (held by a worker just now): run `revoker keys rotate` again.")
            throw Exit.incomplete
        }
        let old = configuration.keyring.keyIDs.filter { $0 != current }
        if !old.isEmpty { print("No row is sealed under \(old.joined(separator: ", ")) any more: those keys may be removed.") }
    }
}
