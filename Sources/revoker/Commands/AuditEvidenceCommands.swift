import ArgumentParser
import Foundation
import RevokerApp
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

            --witness names checkpoints kept outside the database (the service's "audit.witness_path", the \
            audit.checkpoint events an app backend received, earlier `revoker audit checkpoint --json` output): \
            each must still be in the database, unchanged, so removing the newest checkpoints with the rows \
            after them, or rewriting the history and signing it again, is found. With --after-witness the run \
            starts at the newest of them (verified by an earlier run) and reads only the checkpoints after it and \
            the rows since: a daily run does not re-read years.

            Exit status: 0 intact, 1 tampered, 2 could not run (or checkpoints signed by keys not given: not verifiable).

            Examples:
              revoker audit verify
              revoker audit verify --since 2026-01-01 --client-id com.example.app
              revoker audit verify --public-key audit-public-key.pem --witness checkpoints.jsonl --json
              revoker audit verify --public-key audit-public-key.pem --witness kept/ --keep-witness kept/
              revoker audit verify --public-key audit-public-key.pem --witness kept/ --keep-witness kept/ --after-witness
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("since"), help: ArgumentHelp("Only rows that occurred at or after this time (ISO 8601).", valueName: "time"))
    var since: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("Only the chains of this app.", valueName: "client-id"))
    var clientID: String?

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check checkpoints with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    @Option(
        name: .customLong("witness"),
        help: ArgumentHelp("Checkpoints kept outside the database: a file or a directory (repeatable).", valueName: "file-or-dir")
    )
    var witnesses: [String] = []

    @Option(
        name: .customLong("keep-witness"),
        help: ArgumentHelp(
            "After an intact verification, add its newest checkpoint to this file or directory (the next run's --witness).",
            valueName: "file-or-dir"
        )
    )
    var keepWitness: String?

    @Flag(
        name: .customLong("after-witness"),
        help: "Verify only what follows the newest checkpoint of --witness, which an earlier run verified: an auditor's daily run."
    )
    var afterWitness = false

    @Flag(help: "Print the result as JSON.")
    var json = false

    func validate() throws {
        if let since, AuditEventsCommand.parseTime(since) == nil {
            throw ValidationError("--since must be ISO 8601, e.g. 2026-01-31T12:00:00Z or 2026-01-31.")
        }
        if afterWitness && witnesses.isEmpty {
            throw ValidationError("--after-witness needs --witness: the checkpoints an earlier run verified.")
        }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let keys = try auditKeys(configuration, files: publicKeys)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let since = self.since.flatMap(AuditEventsCommand.parseTime)
        let clientID = self.clientID
        // The first run of a routine keeps into the witness it will read from then on.
        let witnessed = try readWitnesses(witnesses.filter { $0 != keepWitness || FileManager.default.fileExists(atPath: $0) })
        let result = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { [keys] client in
            try await AuditVerifier(client: client, logger: logger).verify(
                since: since,
                clientID: clientID,
                keys: keys,
                witnessed: witnessed,
                afterNewestWitness: afterWitness
            )
        }
        print(json ? try result.json() : result.text, terminator: json ? "\n" : "")
        if let keepWitness, result.intact, let newest = result.lastCheckpoint, !witnessed.contains(newest) {
            do {
                try AuditWitness.append(newest, to: keepWitness)
            } catch {
                throw fail("Could not keep the newest checkpoint in '\(keepWitness)': \(error).")
            }
        }
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
            at once, for instance before exporting receipts. Needs the signing key ("audit.signing_key_file"). \
            With "audit.witness_path" it first checks that the database still holds the newest checkpoint the \
            witness holds, refuses to sign otherwise (exit 1), and adds the new one to the witness. --json prints \
            the whole signed checkpoint: an auditor keeps it and verifies against it later (--witness).

            Example:
              revoker audit checkpoint --json
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Flag(help: "Print the checkpoint as JSON.")
    var json = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let signer = try auditSigner(configuration)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let checkpoint = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            let checkpoints = AuditCheckpoints(client: client, logger: logger)
            do {
                return try await checkpoints.take(signer: signer)
            } catch let error as RevokerStoreError where error.code == .historyRewritten {
                if let refusal = signer.refusal { try? await checkpoints.recordRefusal(refusal, actor: "revoker") }
                FileHandle.standardError.write(Data("revoker: \(error.message)\n".utf8))
                throw Exit.someFailed
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
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

/// A checkpoint as JSON: the whole signed record (a witness), with its time and hash for people.
struct AuditCheckpointView: Encodable {
    var checkpoint: AuditCheckpoint

    enum CodingKeys: String, CodingKey {
        case createdAt = "created_at"
        case hash
    }

    init(_ checkpoint: AuditCheckpoint) {
        self.checkpoint = checkpoint
    }

    func encode(to encoder: any Encoder) throws {
        try AuditCheckpointRecord(checkpoint).encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(checkpoint.createdAt.formatted(.iso8601), forKey: .createdAt)
        try container.encode(checkpoint.hash.hex, forKey: .hash)
    }
}

/// The checkpoints held at each `--witness` path; one that cannot be read ends the command (exit 2).
func readWitnesses(_ paths: [String]) throws -> [AuditCheckpoint] {
    var checkpoints: [AuditCheckpoint] = []
    for path in paths {
        do {
            checkpoints += try AuditWitness.read(path)
        } catch {
            throw fail("The witness '\(path)': \(error).")
        }
    }
    return checkpoints
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
              revoker audit receipt --account user-42 > account-receipt.json

            --account (or --deletion-id) gives the receipt of a whole account's completed deletion: the \
            deletion's own chain and the receipts of every request it made and of each grant's hold.

            --archive FILE issues the receipt of a request whose rows were archived (`revoker audit archive`) \
            from that file, without the database:
              revoker audit receipt 0b9c1f3e-8d2a-4c4b-9f1e-2a6d5c7b8e90 --archive audit-before-2026-01.jsonl.gz > receipt.json
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The request's id (a UUID).", valueName: "request-id"))
    var requestID: String?

    @Option(name: .customLong("reference"), help: ArgumentHelp("The newest request with this external reference.", valueName: "reference"))
    var reference: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("With --reference: only this app's requests.", valueName: "client-id"))
    var clientID: String?

    @Option(
        name: .customLong("account"),
        help: ArgumentHelp("Instead: the receipt of this account's newest deletion, with every grant's requests.", valueName: "reference")
    )
    var account: String?

    @Option(name: .customLong("deletion-id"), help: ArgumentHelp("Instead: the receipt of this account deletion.", valueName: "uuid"))
    var deletionID: String?

    @Option(
        name: .customLong("archive"),
        help: ArgumentHelp("Instead of the database: the archive file holding the request's rows.", valueName: "file")
    )
    var archive: String?

    @Flag(help: "Print the receipt as a page for reading and printing.")
    var html = false

    @Option(
        name: .customLong("wait"),
        help: ArgumentHelp("How long to wait for a checkpoint over the request's latest rows (1-600 s).", valueName: "seconds")
    )
    var wait = 60

    func validate() throws {
        guard (1...600).contains(wait) else { throw ValidationError("--wait must be between 1 and 600 seconds.") }
        guard [requestID, reference, account, deletionID].compactMap({ $0 }).count == 1 else {
            throw ValidationError("Give one of: a request id, --reference, --account or --deletion-id.")
        }
        if let requestID, UUID(uuidString: requestID) == nil { throw ValidationError("The request id must be a UUID.") }
        if let deletionID, UUID(uuidString: deletionID) == nil { throw ValidationError("--deletion-id must be a UUID.") }
        if html, account != nil || deletionID != nil { throw ValidationError("--html is for a request's receipt.") }
        if archive != nil, requestID == nil { throw ValidationError("--archive takes the request's id.") }
    }

    /// A receipt from an archive file, issued with the configured key.
    private func fromArchive(_ path: String, id: UUID) throws -> AuditReceipt {
        let configuration = try loadConfiguration(options, needs: [])
        let key = try auditSigningKey(configuration)
        let now = Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down))
        do {
            guard let receipt = try AuditArchive.receipt(path: path, requestID: id, key: key, issuedAtMicros: now) else {
                throw fail("The archive '\(path)' holds no row of request \(id).")
            }
            return receipt
        } catch let error as AuditEvidenceError {
            throw fail("No receipt: \(error.description).")
        }
    }

    func run() async throws {
        if let archive, let id = requestID.flatMap(UUID.init(uuidString:)) {
            let receipt = try fromArchive(archive, id: id)
            FileHandle.standardOutput.write(html ? Data(receipt.html().utf8) : try receipt.canonicalBytes())
            return
        }
        if let archive, let id = requestID.flatMap(UUID.init(uuidString:)) {
            let receipt = try fromArchive(archive, id: id)
            FileHandle.standardOutput.write(html ? Data(receipt.html().utf8) : try receipt.canonicalBytes())
            return
        }
        let configuration = try loadConfiguration(options, needs: .database)
        let signer = try auditSigner(configuration)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        if account != nil || deletionID != nil {
            let (account, deletionID, wait) = (self.account, self.deletionID.flatMap(UUID.init(uuidString:)), self.wait)
            let receipt = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
                let receipts = AuditReceipts(client: client, logger: logger)
                var id = deletionID
                if let account { id = try await receipts.deletion(reference: account) }
                guard let id else { return nil as AccountReceipt? }
                do {
                    return try await receipts.issueAccount(deletionID: id, signer: signer, wait: .seconds(wait))
                } catch let error as RevokerStoreError {
                    throw fail("No receipt: \(error.message).")
                }
            }
            guard let receipt else { throw fail("There is no deletion \(account.map { "of account \($0)" } ?? self.deletionID ?? "").") }
            FileHandle.standardOutput.write(try receipt.canonicalBytes())
            return
        }
        let (id, reference, clientID, wait) = (requestID.flatMap(UUID.init(uuidString:)), self.reference, self.clientID, self.wait)
        let receipt = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            let receipts = AuditReceipts(client: client, logger: logger)
            var requestID = id
            if requestID == nil { requestID = try await receipts.request(reference: reference ?? "", clientID: clientID) }
            guard let requestID else { return nil as AuditReceipt? }
            do {
                return try await receipts.issue(requestID: requestID, signer: signer, wait: .seconds(wait))
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
            --public-key or found in the configuration. Any changed byte makes it fail. With --witness, each \
            checkpoint the receipt carries that the witness holds too must be the witness's own: a receipt \
            issued over a rewritten and re-signed history fails.
            Exit status: 0 valid, 1 not valid, 2 could not run.

            Example:
              revoker audit verify-receipt receipt.json --public-key audit-public-key.pem --witness checkpoints.jsonl
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Argument(help: ArgumentHelp("The receipt file.", valueName: "file"))
    var file: String

    @Option(name: .customLong("public-key"), help: ArgumentHelp("A PEM public key to check with (repeatable).", valueName: "file"))
    var publicKeys: [String] = []

    @Option(
        name: .customLong("witness"),
        help: ArgumentHelp("Checkpoints kept outside the database: a file or a directory (repeatable).", valueName: "file-or-dir")
    )
    var witnesses: [String] = []

    func run() throws {
        let configuration = try loadConfiguration(options, needs: [])
        let keys = try auditKeys(configuration, files: publicKeys)
        guard !keys.isEmpty else { throw fail("No public key: pass --public-key FILE (from `revoker audit public-key`).") }
        guard let bytes = FileManager.default.contents(atPath: file) else { throw fail("The receipt file '\(file)' cannot be read.") }
        let witnessed = try readWitnesses(witnesses)
        if AccountReceipt.isAccountReceipt(bytes) {
            let result = AccountReceipt.verify(bytes, keys: keys, witnessed: witnessed)
            if result.valid, let receipt = result.receipt {
                let summary = receipt.summary
                print(
                    "Account receipt valid: deletion \(summary.deletionID) of \(summary.accountReference ?? "?"), outcome \(summary.outcome ?? "?"), "
                        + "\(summary.grants.count) grants, \(receipt.requests.count) request receipts, signed by key \(receipt.keyID)"
                )
                for grant in summary.grants {
                    print(
                        "  grant \(grant.grantID): \(grant.provider ?? "?") \(grant.clientID ?? "?"), \(grant.state ?? "?") (\(grant.outcome ?? "?"))"
                    )
                }
                return
            }
            print("Account receipt NOT valid:")
            for problem in result.problems { print("  \(problem)") }
            throw Exit.someFailed
        }
        let result = AuditReceipt.verify(bytes, keys: keys, witnessed: witnessed)
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

/// The configured signer (reading the witness, when one is configured), or the exit that says
/// what to configure.
func auditSigner(_ configuration: RevokerConfiguration) throws -> AuditSigner {
    let key = try auditSigningKey(configuration)
    do {
        return try AuditSigner(key: key, trustedKeys: configuration.audit.verificationKeys, witnessPath: configuration.audit.witnessPath)
    } catch {
        throw fail("The audit witness cannot be read: \(error).")
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
