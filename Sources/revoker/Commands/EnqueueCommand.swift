import AppleSignIn
import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerProvider
import RevokerStore
import RevokerWorker

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Queue the revocation of one user's sign-in grant (for scripts and operators).",
        discussion: """
            Stores the user's credential sealed in PostgreSQL; a worker revokes it at its provider (Apple unless \
            --provider names another) and records \
            every step in the audit trail (actor cli:<your login>). The credential is read from a file or from \
            standard input, never from the command line, where it would end up in shell history and process lists.

            Enqueueing is idempotent: the same --client-id and --reference with the same credential returns the \
            live request that already exists; a different credential for a live request is refused.

            Examples:
              revoker enqueue --client-id com.example.app --reference user-42 \\
                --kind refresh-token --credential-file /run/secrets/token --json
              printf %s "$TOKEN" | revoker enqueue --client-id com.example.app \\
                --reference user-42 --kind refresh-token --credential-stdin

            Exit codes: 0 enqueued (new or existing), 2 refused (nothing was stored).
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(
        name: .customLong("provider"),
        help: ArgumentHelp("The sign-in provider that issued the grant: apple (the default) or another configured one.", valueName: "name")
    )
    var provider: String = NewRevocation.defaultProvider

    @Option(
        name: .customLong("client-id"),
        help: ArgumentHelp("The app's client_id (bundle id or Services ID) as configured in Revoker.", valueName: "client-id")
    )
    var clientID: String

    @Option(
        name: .customLong("reference"),
        help: ArgumentHelp(
            "Your own id for the account being deleted (1-255 characters); with --client-id it makes enqueueing idempotent.",
            valueName: "reference"
        )
    )
    var reference: String

    @OptionGroup var user: UserOptions

    @Option(
        name: .customLong("redirect-uri"),
        help: ArgumentHelp(
            "The redirect_uri the authorization code was issued for (codes from the web only; default: the app's configured one).",
            valueName: "url"
        )
    )
    var redirectURI: String?

    // A String, not an enum: ArgumentParser would echo a rejected value, and that value could be a token.
    @Option(
        name: .customLong("kind"),
        help: ArgumentHelp(
            "What the credential is: authorization-code (from the app's sign-in, valid 5 minutes), refresh-token or access-token.",
            valueName: "kind"
        )
    )
    var kind: String

    @OptionGroup var credential: CredentialOptions

    // A String for the same reason as --kind: a rejected value is not echoed.
    @Option(
        name: .customLong("max-attempts"),
        help: ArgumentHelp("Attempts before the request fails as exhausted, 1-100 (default: the worker's max_attempts).", valueName: "n")
    )
    var maxAttempts: String?

    @Flag(name: .customLong("json"), help: #"Print {"id": …, "state": …, "created": true|false} for scripts."#)
    var json = false

    /// Anything the parser did not recognise. Captured so that a token pasted on the command
    /// line is refused without being echoed (ArgumentParser's own error would print it).
    @Argument(parsing: .allUnrecognized, help: .hidden)
    var unrecognized: [String] = []

    func validate() throws {
        if !unrecognized.isEmpty {
            throw fail(
                "Unexpected command-line input (\(unrecognized.count) value\(unrecognized.count == 1 ? "" : "s"), not shown). "
                    + "Never put a credential on the command line: use --credential-file PATH or --credential-stdin. Nothing was stored."
            )
        }
        guard Self.kinds[kind] != nil else {
            throw fail("--kind must be authorization-code, refresh-token or access-token (the value given is not shown). Nothing was stored.")
        }
        if redirectURI != nil, Self.kinds[kind] != .authorizationCode {
            throw fail("--redirect-uri applies only to --kind authorization-code. Nothing was stored.")
        }
        if let maxAttempts, Int(maxAttempts) == nil {
            throw fail("--max-attempts must be a whole number. Nothing was stored.")
        }
        try user.check()
        try credential.check()
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .all)
        guard let kind = Self.kinds[kind] else { throw Exit.couldNotRun }
        // What is configured is checked before the credential is read.
        do {
            try EnqueueRules(served: configuration.clientIDsByProvider, providers: SignInProviders([])).check(provider: provider, clientID: clientID)
        } catch {
            throw fail(Self.sentence(error, provider: provider))
        }
        let secret = try credential.read()
        let logger = CommandLogging.logger(label: "revoker.enqueue", level: options.logLevel)
        var new: NewRevocation
        do {
            new = try NewRevocation(
                provider: provider,
                clientID: clientID,
                externalReference: reference,
                userID: user.userID,
                credential: Credential(kind: kind, secret: secret),
                redirectURI: redirectURI,
                maxAttempts: maxAttempts.flatMap { Int($0) } ?? configuration.worker.maxAttempts
            )
            if let idTokenFile = user.idTokenFile {
                let token = try Self.readIdentityToken(idTokenFile)
                let unbound = new
                new = try await RevokerApp.withProviders(configuration, logger: logger) { providers in
                    try await EnqueueRules(served: configuration.clientIDsByProvider, providers: providers).binding(unbound, toIdentityToken: token)
                }
            }
        } catch let invalid as NewRevocation.Invalid {
            throw fail(Self.sentence(.invalid(invalid), provider: provider))
        } catch let refusal as EnqueueRules.Refusal {
            throw fail(Self.sentence(refusal, provider: provider))
        }
        let actor = Self.actor()
        let result = try await withDatabase(configuration, logger: logger) { [new] client in
            do {
                return try await RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
                    .enqueue(new, actor: actor)
            } catch let error as RevokerStoreError where error.code == .conflict {
                throw fail(
                    "A live request for this --client-id and --reference holds a different credential (or kind); "
                        + "it was not replaced. Wait for it to finish, or cancel it first. Nothing was stored."
                )
            } catch let error as RevokerStoreError {
                let current = (try? await Migrator(client: client, logger: logger).isCurrent()) ?? true
                if !current { throw fail("The database schema is not current: run `revoker migrate` first. Nothing was stored.") }
                throw fail("Could not enqueue: \(error.message). Nothing was stored.")
            }
        }
        let request = result.request
        let created = if case .created = result { true } else { false }
        if json {
            let object = EnqueueOutput(id: request.id.uuidString.lowercased(), state: request.state.rawValue, created: created)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(object), as: UTF8.self))
        } else if created {
            print("Enqueued \(request.id.uuidString.lowercased()) (new request, state \(request.state)).")
        } else {
            print(
                "Already enqueued: \(request.id.uuidString.lowercased()) (existing live request with the same credential, state \(request.state)); nothing new was stored."
            )
        }
    }

    /// A refusal of the enqueue rules in this command's words.
    static func sentence(_ refusal: EnqueueRules.Refusal, provider: String) -> String {
        let reason: String =
            switch refusal {
            case .invalid(let invalid): "\(place(of: invalid.field)) \(invalid.rule)."
            case .unknownProvider(let configured):
                "--provider is not a configured provider (configured: \(configured.joined(separator: ", ")))."
            case .unknownApp(let configured):
                "The --client-id is not a configured \(provider) app (configured: \(configured.joined(separator: ", ")))."
            case .unsupportedCredential(let accepted):
                "--provider \(provider) takes \(accepted.map { $0.replacingOccurrences(of: "_", with: "-") }.joined(separator: " or ")) only (--kind)."
            case .unverifiableIdentityToken: "--provider \(provider) cannot verify identity tokens here."
            case .identityTokenRejected(let rejected): "The identity token did not verify (\(rejected.code)): \(rejected.reason)"
            case .keysUnavailable(let failure):
                "The provider's keys could not be fetched to verify the identity token (\(failure.detail)); try again."
            }
        return reason + " Nothing was stored."
    }

    /// The identity token in `file`: one token of at most ``EnqueueRules/maximumIdentityTokenBytes``.
    static func readIdentityToken(_ file: String) throws -> String {
        let limit = EnqueueRules.maximumIdentityTokenBytes
        guard let handle = FileHandle(forReadingAtPath: file), let data = try? handle.read(upToCount: limit + 1), data.count <= limit,
            let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty
        else {
            throw fail(
                "--id-token-file must be a readable file holding one identity token of at most \(limit) bytes (path not shown). Nothing was stored."
            )
        }
        try? handle.close()
        return text
    }

    struct EnqueueOutput: Encodable {
        var id: String
        var state: String
        var created: Bool
    }

    /// Reads the credential from `file`, or standard input when nil, never more than
    /// `maximumBytes + 1` bytes, then checks it is one non-empty token.
    ///
    /// It stops reading at the limit (so `/dev/zero` or a huge pipe cannot
    /// exhaust memory), accepts pipes such as `<(vault read …)`, and does not print the path
    /// (a mistyped command line can put a token there).
    static func readBoundedCredential(file: String?, maximumBytes: Int) throws -> String {
        let handle: FileHandle
        if let file {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue,
                let opened = FileHandle(forReadingAtPath: file)
            else {
                throw fail("The file given with --credential-file does not exist or cannot be read (path not shown). Nothing was stored.")
            }
            handle = opened
        } else {
            handle = FileHandle.standardInput
            if isatty(STDIN_FILENO) == 1 {
                FileHandle.standardError.write(Data("Paste the credential, then press Return and Ctrl-D:\n".utf8))
            }
        }
        defer { if file != nil { try? handle.close() } }
        var data = Data()
        do {
            while data.count <= maximumBytes, let chunk = try handle.read(upToCount: maximumBytes + 1 - data.count), !chunk.isEmpty {
                data.append(chunk)
            }
        } catch {
            throw fail("The credential could not be read (\(file == nil ? "standard input" : "--credential-file")). Nothing was stored.")
        }
        guard data.count <= maximumBytes else {
            throw fail("The credential is larger than \(maximumBytes) bytes; Apple's codes and tokens are far smaller. Nothing was stored.")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw fail("The credential is not UTF-8 text. Nothing was stored.")
        }
        let credential = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !credential.isEmpty else { throw fail("The credential is empty. Nothing was stored.") }
        guard !credential.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } == true }) else {
            throw fail("The credential contains whitespace or control characters inside it; expected one code or token. Nothing was stored.")
        }
        return credential
    }

    /// The largest credential accepted (the store's own limit).
    static let maximumCredentialBytes = 8192

    /// `--kind` values; the API's spellings (`refresh_token`) are accepted too.
    static let kinds: [String: CredentialKind] = Dictionary(
        uniqueKeysWithValues: CredentialKind.all.flatMap { kind in
            [(kind.rawValue.replacingOccurrences(of: "_", with: "-"), kind), (kind.rawValue, kind)]
        }
    )

    /// Where a field of a new revocation comes from on this command line.
    static func place(of field: NewRevocation.Field) -> String {
        switch field {
        case .provider: "--provider"
        case .clientID: "--client-id"
        case .externalReference: "--reference"
        case .userID: "--user-id"
        case .credential: "The credential"
        case .redirectURI: "--redirect-uri"
        case .maxAttempts: "--max-attempts"
        }
    }

    static func isControl(_ character: Character) -> Bool {
        character.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// `cli:<login name>` for the audit trail: the account running the command.
    static func actor() -> String {
        var name: String?
        if let entry = getpwuid(getuid()), let raw = entry.pointee.pw_name {
            name = String(cString: raw)
        }
        if name?.isEmpty ?? true {
            name = ProcessInfo.processInfo.environment["LOGNAME"] ?? ProcessInfo.processInfo.environment["USER"]
        }
        let cleaned = String((name ?? "").filter { !isControl($0) }.prefix(190))
        return "cli:" + (cleaned.isEmpty ? "uid-\(getuid())" : cleaned)
    }
}
