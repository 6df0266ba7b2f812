import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerHTTP
import RevokerProvider
import RevokerStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct GrantsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grants",
        abstract: "Hold sign-in grants in custody: register one at sign-in, or import the refresh tokens a backend already holds.",
        discussion: """
            Examples:
              printf %s "$CODE" | revoker grants register --client-id com.example.app \\
                --account-reference user-42 --kind authorization-code --credential-stdin
              revoker grants import --file tokens.jsonl
              revoker accounts show --account-reference user-42
            """,
        subcommands: [GrantsRegisterCommand.self, GrantsImportCommand.self]
    )
}

struct GrantsRegisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Take one grant into custody: an authorization code (exchanged at once by a worker) or a refresh token (validated).",
        discussion: """
            The credential is read from a file or standard input, never from the command line. It waits as a \
            request that a running worker (`revoker work` or `serve`) carries ahead of everything else: a code is \
            exchanged within its life, a refresh token validated once; the grant is held bound to the user the \
            provider's answer names. This command waits up to --wait seconds for that and prints where the grant \
            stands. Registering the same code or token again returns the same grant.

            Examples:
              printf %s "$CODE" | revoker grants register --client-id com.example.app \\
                --account-reference user-42 --kind authorization-code --id-token-file id_token.jwt --credential-stdin
              revoker grants register --provider google --client-id 1234.apps.googleusercontent.com \\
                --account-reference user-42 --kind refresh-token --credential-file /run/secrets/token --json

            Exit codes: 0 held, or still pending when the wait ran out (a worker takes it in); \
            1 the grant failed (its code or token refused: end_reason says why); 2 refused (nothing was stored).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("provider"), help: ArgumentHelp("The sign-in provider: apple (the default) or google.", valueName: "name"))
    var provider: String = NewRevocation.defaultProvider

    @Option(name: .customLong("client-id"), help: ArgumentHelp("The app's client_id as configured in Revoker.", valueName: "client-id"))
    var clientID: String

    @Option(
        name: .customLong("account-reference"),
        help: ArgumentHelp("Your own id for the account (1-255 characters); deleting it later names only this.", valueName: "reference")
    )
    var accountReference: String

    @OptionGroup var user: UserOptions

    @Option(
        name: .customLong("redirect-uri"),
        help: ArgumentHelp("The redirect_uri the code was issued for (web sign-ins only).", valueName: "url")
    )
    var redirectURI: String?

    // A String, not an enum: ArgumentParser would echo a rejected value, and that value could be a token.
    @Option(
        name: .customLong("kind"),
        help: ArgumentHelp(
            "authorization-code or refresh-token (Apple, Google); access-token or identity-token (Facebook: a person's token, or a Limited Login token).",
            valueName: "kind"
        )
    )
    var kind: String

    @OptionGroup var credential: CredentialOptions

    @Option(
        name: .customLong("wait"),
        help: ArgumentHelp("Seconds to wait for a worker to exchange a code (default 10; 0 returns at once).", valueName: "seconds")
    )
    var wait: Double = 10

    @Flag(name: .customLong("json"), help: "Print the grant as the API shows it (GET /v1/grants/{id}), with \"created\".")
    var json = false

    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func validate() throws {
        if !unrecognized.isEmpty {
            throw fail(
                "Unexpected command-line input (not shown). Never put a credential on the command line: "
                    + "use --credential-file PATH or --credential-stdin. Nothing was stored."
            )
        }
        guard let kind = EnqueueCommand.kinds[kind] else {
            throw fail(
                "--kind must be authorization-code, refresh-token, access-token or identity-token (the value given is not shown). Nothing was stored."
            )
        }
        if kind == .identityToken, user.idTokenFile != nil || user.userID != nil {
            throw fail("An identity-token grant names its user itself: leave out --id-token-file and --user-id. Nothing was stored.")
        }
        try user.check()
        try credential.check()
        guard wait.isFinite, (0...600).contains(wait) else { throw fail("--wait must be between 0 and 600 seconds. Nothing was stored.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .all)
        guard let kind = EnqueueCommand.kinds[kind] else { throw Exit.couldNotRun }
        do {
            try EnqueueRules(served: configuration.clientIDsByProvider, providers: SignInProviders([])).check(provider: provider, clientID: clientID)
        } catch {
            throw fail(EnqueueCommand.sentence(error, provider: provider))
        }
        let secret = try self.credential.read()
        let logger = CommandLogging.logger(label: "revoker.grants", level: options.logLevel)
        let credential = Credential(kind: kind, secret: secret)
        var new: NewGrant
        do {
            new = try NewGrant(
                provider: provider,
                clientID: clientID,
                accountReference: accountReference,
                credential: credential,
                redirectURI: redirectURI,
                userID: user.userID
            )
            // The grant checked against its provider, and the identity token that names its user
            // (the grant's own, for an identity-token grant) verified.
            let identityToken = try kind == .identityToken ? secret : user.idTokenFile.map(EnqueueCommand.readIdentityToken)
            new = try await RevokerApp.withProviders(configuration, logger: logger) { [new, provider, clientID] providers in
                let rules = EnqueueRules(served: configuration.clientIDsByProvider, providers: providers)
                try rules.check(new)
                guard let identityToken else { return new }
                return try new.withUser(
                    try await rules.verifiedSubject(of: identityToken, provider: provider, clientID: clientID),
                    fromIdentityToken: true
                )
            }
        } catch let invalid as NewRevocation.Invalid {
            throw fail("\(Self.place(of: invalid.field)) \(invalid.rule). Nothing was stored.")
        } catch let refusal as EnqueueRules.Refusal {
            throw fail(EnqueueCommand.sentence(refusal, provider: provider))
        }
        let actor = EnqueueCommand.actor()
        let wait = Duration.milliseconds(Int(self.wait * 1000))
        let (grant, created) = try await withDatabase(configuration, logger: logger) { [new] client in
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            let registration: GrantRegistration
            do {
                registration = try await queue.custody.register(new, actor: actor)
            } catch let error as RevokerStoreError where error.code == .conflict {
                throw fail("This code or token is already held for another account or provider; it was not registered again.")
            } catch let error as RevokerStoreError {
                throw fail("Could not register: \(error.message). Nothing was stored.")
            }
            let created = if case .created = registration { true } else { false }
            return (try await queue.custody.settled(registration.grant, within: wait), created)
        }
        if json {
            print(try AccountsCommand.json(Registered(created: created, grant: GrantView(grant))))
        } else {
            print((created ? "Registered " : "Already registered: ") + AccountsCommand.line(grant))
            if grant.state == .pending {
                print("Its code waits for a worker to exchange it (`revoker work`, `serve` or `drain` takes it first).")
            }
        }
        if grant.state == .failed { throw Exit.someFailed }
    }

    struct Registered: Encodable {
        var created: Bool
        var grant: GrantView
    }

    /// Where a field of a new grant comes from on this command line.
    static func place(of field: NewRevocation.Field) -> String {
        switch field {
        case .externalReference: "--account-reference"
        default: EnqueueCommand.place(of: field)
        }
    }
}

struct GrantsImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Take the refresh tokens a backend already holds into custody, from JSON lines.",
        discussion: """
            Each line is one JSON object: {"account_reference": "user-42", "refresh_token": "…"} with optional \
            "provider" (default: --provider), "client_id" (default: --client-id) and "user_id". A Facebook grant is \
            the person's access token instead: {"account_reference": "user-42", "access_token": "…"}. Blank lines are \
            passed over. Lines are read from --file or standard input (never the command line) and registered \
            \(GrantImport.batchSize) at a time; each refused line is reported by its number and why, never its content.

            Each token is taken in as `grants register` takes one: a running worker validates it once and holds it \
            bound to the user the provider's answer names. Importing is idempotent (a token already taken in for \
            the account is reported as existing) and resumable: \
            after each batch the progress is recorded in --progress-file (default: FILE.import-progress with \
            --file), and a new run with the same file continues after the last recorded batch once it has checked \
            the lines before are the ones recorded. --restart ignores the record.

            Examples:
              revoker grants import --file tokens.jsonl
              psql -At -c "SELECT json_build_object('account_reference', id, 'refresh_token', apple_token) FROM users" \\
                | revoker grants import --client-id com.example.app --progress-file import.progress

            Exit codes: 0 every line taken in (new or existing); 1 some lines refused (the others are taken in); \
            2 could not run (the progress record says how far it got).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("file"), help: ArgumentHelp("Read the lines from this file (default: standard input).", valueName: "path"))
    var file: String?

    @Option(
        name: .customLong("progress-file"),
        help: ArgumentHelp("Where progress is recorded and resumed from (default: FILE.import-progress with --file).", valueName: "path")
    )
    var progressFile: String?

    @Flag(name: .customLong("restart"), help: "Start from the first line even if a progress record exists.")
    var restart = false

    @Option(name: .customLong("provider"), help: ArgumentHelp("The provider of lines that name none (default apple).", valueName: "name"))
    var provider: String = NewRevocation.defaultProvider

    @Option(name: .customLong("client-id"), help: ArgumentHelp("The client_id of lines that name none.", valueName: "client-id"))
    var clientID: String?

    @Flag(name: .customLong("json"), help: "Print one JSON object per refused line, then a summary object.")
    var json = false

    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func validate() throws {
        if !unrecognized.isEmpty {
            throw fail("Unexpected command-line input (not shown). Give the lines with --file PATH or on standard input.")
        }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .all)
        let logger = CommandLogging.logger(label: "revoker.grants", level: options.logLevel)
        let input: FileHandle
        if let file {
            guard let handle = FileHandle(forReadingAtPath: file) else { throw fail("--file cannot be read: \(file).") }
            input = handle
        } else {
            input = .standardInput
        }
        let record = progressFile ?? file.map { $0 + ".import-progress" }
        var progress = GrantImport.Progress()
        if let record, !restart, let data = FileManager.default.contents(atPath: record) {
            guard let saved = try? JSONDecoder().decode(GrantImport.Progress.self, from: data) else {
                throw fail("The progress record \(record) is not one this command wrote; remove it or give --restart.")
            }
            progress = saved
            FileHandle.standardError.write(Data("revoker: resuming after line \(saved.lines) (\(record)).\n".utf8))
        }
        let actor = EnqueueCommand.actor()
        let showsProgress = isatty(STDERR_FILENO) == 1
        let started = ContinuousClock.now
        let startLines = progress.lines
        // The providers say what their grants come as.
        let final = try await RevokerApp.withProviders(configuration, logger: logger) { [progress] providers in
            try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
                let importer = GrantImport(
                    queue: RevocationQueue(client: client, sealer: configuration.sealer, logger: logger),
                    rules: EnqueueRules(served: configuration.clientIDsByProvider, providers: providers),
                    defaultProvider: provider,
                    defaultClientID: clientID,
                    actor: actor,
                    logger: logger
                )
                do {
                    return try await importer.run(input, from: progress) { results, progress in
                        for (line, result) in results {
                            guard case .refused(let refusal) = result else { continue }
                            print(
                                json
                                    ? try AccountsCommand.json(Refused(line: line, refused: refusal.reason))
                                    : "line \(line): refused: \(refusal.reason)."
                            )
                        }
                        if let record { try Self.save(progress, to: record) }
                        if showsProgress {
                            let rate = Double(progress.lines - startLines) / max((ContinuousClock.now - started) / .seconds(1), 0.001)
                            FileHandle.standardError.write(
                                Data(
                                    "\r\(progress.lines) lines: \(progress.held) taken in, \(progress.existing) existing, \(progress.refused) refused (\(Int(rate)) lines/s)"
                                        .utf8
                                )
                            )
                        }
                    }
                } catch let refusal as GrantImport.Refusal {
                    throw fail("\(refusal.reason); give --restart to read it from the first line (lines already held are reported as existing).")
                } catch let error as RevokerStoreError {
                    throw fail("Could not register: \(error.message). Run it again to resume.")
                }
            }
        }
        if showsProgress { FileHandle.standardError.write(Data("\n".utf8)) }
        if json {
            print(try AccountsCommand.json(Summary(lines: final.lines, held: final.held, existing: final.existing, refused: final.refused)))
        } else {
            print(
                "Imported \(final.lines) lines: \(final.held) taken in, \(final.existing) already taken in, \(final.refused) refused."
            )
        }
        if final.refused > 0 { throw Exit.someFailed }
    }

    struct Refused: Encodable {
        var line: Int
        var refused: String
    }

    struct Summary: Encodable {
        var lines: Int
        var held: Int
        var existing: Int
        var refused: Int
    }

    /// Writes the progress record whole or not at all (a crash mid-write leaves the old one).
    static func save(_ progress: GrantImport.Progress, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let temporary = path + ".tmp"
        try encoder.encode(progress).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else { throw fail("Could not record progress in \(path).") }
    }
}
