import ArgumentParser
import Foundation
import RevokerConfiguration
import RevokerEvidence
import RevokerStore

struct AuditVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check that no audit row was changed, removed, added or moved: chains, heads and signed checkpoints.",
        discussion: """
            Recomputes every row's hash and follows each chain (one per request, one per app), compares each \
            chain's end with the head the database recorded, and checks every checkpoint's signature, its link \
            to the one before, and that its slice still holds exactly the rows it signed for. Anything that does \
            not hold is printed with the rows it concerns and how.

            Checkpoints verify with the configured signing key's public half, the keys under \
            "audit.public_key_files", and any --public-key given: an auditor needs only the public key.

            Exit status: 0 intact, 1 tampered, 2 could not run (or only checkpoints signed by keys not given).

            Examples:
              revoker audit verify
              revoker audit verify --since 2026-01-01 --client-id com.example.app
              revoker audit verify --public-key audit-public-key.pem --json
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("since"), help: ArgumentHelp("Only rows that occurred at or after this time (ISO 8601).", valueName: "time"))
    var since: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("Only the chains of this app.", valueName: "client-id"))
    var clientID: String?

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check checkpoints with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    @Flag(help: "Print the result as JSON.")
    var json = false

    func validate() throws {
        if let since, AuditEventsCommand.parseTime(since) == nil {
            throw ValidationError("--since must be ISO 8601, e.g. 2026-01-31T12:00:00Z or 2026-01-31.")
        }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let keys = try auditKeys(configuration, files: publicKeys)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let since = self.since.flatMap(AuditEventsCommand.parseTime)
        let clientID = self.clientID
        let result = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { [keys] client in
            try await AuditVerifier(client: client, logger: logger).verify(since: since, clientID: clientID, keys: keys)
        }
        print(json ? try result.json() : result.text, terminator: json ? "\n" : "")
        if result.problems.contains(where: { $0.kind != .unknownKey }) { throw Exit.someFailed }
        if !result.intact { throw Exit.couldNotRun }
    }
}

struct AuditCheckpointCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkpoint",
        abstract: "Sign a checkpoint over the audit rows written since the last one, now.",
        discussion: """
            Worker and serving processes take one every "audit.checkpoint_interval_seconds" (60); this takes one \
            at once, for instance before exporting receipts. Needs the signing key ("audit.signing_key_file").

            Example:
              revoker audit checkpoint --json
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Flag(help: "Print the checkpoint as JSON.")
    var json = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let key = try auditSigningKey(configuration)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let checkpoint = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            try await AuditCheckpoints(client: client, logger: logger).take(signingWith: key)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(checkpoint.map(AuditCheckpointView.init)), as: UTF8.self))
        } else if let checkpoint {
            print(
                "checkpoint \(checkpoint.seq): \(checkpoint.rowCount) rows, Merkle root \(checkpoint.merkleRoot.hex), signed by key \(checkpoint.keyID)"
            )
        } else {
            print("nothing new to checkpoint (or another process is taking one)")
        }
    }
}

struct AuditPublicKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "public-key",
        abstract: "Print the public key that verifies checkpoints and receipts (PEM).",
        discussion: """
            Give it to whoever must check the trail without trusting the database: `revoker audit verify \
            --public-key FILE` and `revoker audit verify-receipt` use it.

            Example:
              revoker audit public-key > audit-public-key.pem
            """
    )

    @OptionGroup var options: ConfigurationOptions

    func run() throws {
        let configuration = try loadConfiguration(options, needs: [])
        let key = try auditSigningKey(configuration)
        FileHandle.standardError.write(Data("revoker: key id \(key.publicKey.keyID)\n".utf8))
        print(key.publicKey.pemRepresentation)
    }
}

/// A checkpoint as JSON: hex for bytes, snake_case keys.
struct AuditCheckpointView: Encodable {
    var seq: Int64
    var createdAt: String
    var rowCount: Int64
    var merkleRoot: String
    var keyID: String

    enum CodingKeys: String, CodingKey {
        case seq
        case createdAt = "created_at"
        case rowCount = "row_count"
        case merkleRoot = "merkle_root"
        case keyID = "key_id"
    }

    init(_ checkpoint: AuditCheckpoint) {
        seq = checkpoint.seq
        createdAt = checkpoint.createdAt.formatted(.iso8601)
        rowCount = checkpoint.rowCount
        merkleRoot = checkpoint.merkleRoot.hex
        keyID = checkpoint.keyID
    }
}

/// Public keys from `--public-key` files, after the configured ones; a file that cannot be
/// read or is not a key ends the command (exit 2).
func auditKeys(_ configuration: RevokerConfiguration, files: [String]) throws -> [AuditPublicKey] {
    var keys = configuration.audit.verificationKeys
    for path in files {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw fail("The public key file '\(path)' cannot be read.") }
        do {
            keys.append(try AuditPublicKey(pemRepresentation: text))
        } catch {
            throw fail("The public key file '\(path)': \(error).")
        }
    }
    return keys
}

struct AuditReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Print a signed receipt for one request: what was asked, by whom, each call to Apple, the outcome, and the proof.",
        discussion: """
            The receipt holds every audit row of the request with its Merkle path to a signed checkpoint (one is \
            taken first if the latest rows are not under one yet), and a summary derived from those rows. Anyone \
            with the public key checks it offline: `revoker audit verify-receipt`. With --html it prints a page \
            for reading and printing instead; the JSON file is the evidence.

            Examples:
              revoker audit receipt 0b9c1f3e-8d2a-4c4b-9f1e-2a6d5c7b8e90 > receipt.json
              revoker audit receipt --reference user-42 > receipt.json
              revoker audit receipt --reference user-42 --html > receipt.html
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The request's id (a UUID).", valueName: "request-id"))
    var requestID: String?

    @Option(name: .customLong("reference"), help: ArgumentHelp("The newest request with this external reference.", valueName: "reference"))
    var reference: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("With --reference: only this app's requests.", valueName: "client-id"))
    var clientID: String?

    @Flag(help: "Print the receipt as a page for reading and printing.")
    var html = false

    @Option(
        name: .customLong("wait"),
        help: ArgumentHelp("How long to wait for a checkpoint over the request's latest rows (1-600 s).", valueName: "seconds")
    )
    var wait = 60

    func validate() throws {
        guard (1...600).contains(wait) else { throw ValidationError("--wait must be between 1 and 600 seconds.") }
        guard (requestID == nil) != (reference == nil) else { throw ValidationError("Give a request id or --reference, one of them.") }
        if let requestID, UUID(uuidString: requestID) == nil { throw ValidationError("The request id must be a UUID.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let key = try auditSigningKey(configuration)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let (id, reference, clientID, wait) = (requestID.flatMap(UUID.init(uuidString:)), self.reference, self.clientID, self.wait)
        let receipt = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            let receipts = AuditReceipts(client: client, logger: logger)
            var requestID = id
            if requestID == nil { requestID = try await receipts.request(reference: reference ?? "", clientID: clientID) }
            guard let requestID else { return nil as AuditReceipt? }
            do {
                return try await receipts.issue(requestID: requestID, key: key, wait: .seconds(wait))
            } catch let error as RevokerStoreError {
                throw fail("No receipt: \(error.message).")
            }
        }
        guard let receipt else { throw fail("The audit trail has no request \(requestID ?? "with that reference").") }
        if html {
            FileHandle.standardOutput.write(Data(receipt.html().utf8))
        } else {
            FileHandle.standardOutput.write(try receipt.canonicalBytes())
        }
    }
}

struct AuditVerifyReceiptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify-receipt",
        abstract: "Check a receipt offline: its signature, every event's hash and chain, and its proofs into signed checkpoints.",
        discussion: """
            Needs no database: only the file and the public key (`revoker audit public-key`), given with \
            --public-key or found in the configuration. Any changed byte makes it fail.
            Exit status: 0 valid, 1 not valid, 2 could not run.

            Example:
              revoker audit verify-receipt receipt.json --public-key audit-public-key.pem
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The receipt file.", valueName: "file"))
    var file: String

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    func run() throws {
        let configuration = try loadConfiguration(options, needs: [])
        let keys = try auditKeys(configuration, files: publicKeys)
        guard !keys.isEmpty else { throw fail("No public key: pass --public-key FILE (from `revoker audit public-key`).") }
        guard let bytes = FileManager.default.contents(atPath: file) else { throw fail("The receipt file '\(file)' cannot be read.") }
        let result = AuditReceipt.verify(bytes, keys: keys)
        if result.valid, let receipt = result.receipt {
            let summary = receipt.summary
            print(
                "Receipt valid: request \(summary.requestID) (\(summary.clientID ?? "?")), \(receipt.events.count) events, "
                    + "outcome \(summary.outcome ?? "not final"), signed by key \(receipt.keyID)"
            )
            return
        }
        print("Receipt NOT valid:")
        for problem in result.problems { print("  \(problem)") }
        throw Exit.someFailed
    }
}

/// The configured audit signing key, or the exit that says how to configure one.
func auditSigningKey(_ configuration: RevokerConfiguration) throws -> AuditSigningKey {
    guard let key = configuration.audit.signingKey else {
        throw fail(
            "No audit signing key: set \"audit.signing_key_file\" (or \(RevokerConfiguration.Variable.auditSigningKeyFile)); `revoker keygen --audit` makes one."
        )
    }
    return key
}
