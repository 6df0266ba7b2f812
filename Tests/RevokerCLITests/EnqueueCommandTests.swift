import AppleSignInSandbox
import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

@Suite("revoker enqueue")
struct EnqueueCommandTests {
    @Test("enqueues from a file with --json, replays idempotently, refuses a conflicting replay")
    func fromFileReplayAndConflict() async throws {
        try await CLIFixture.with { fixture in
            let token = randomToken()
            let file = try fixture.write("\(token)\n")
            let arguments = [
                "enqueue", "--client-id", "com.example.app", "--reference", "user-1", "--apple-user-id", "000123.abc",
                "--kind", "refresh-token", "--credential-file", file, "--json",
            ]
            let first = try await fixture.run(arguments)
            #expect(first.status == 0, "\(first.stderr)")
            expectNothingLeaked(first, [token])
            let object = try #require(try parseJSON(first.stdout) as? [String: Any])
            #expect(object["created"] as? Bool == true)
            #expect(object["state"] as? String == "pending")
            let id = try #require((object["id"] as? String).flatMap(UUID.init(uuidString:)))

            let stored = try #require(try await fixture.queue().request(id: id))
            #expect(stored.clientID == "com.example.app")
            #expect(stored.externalReference == "user-1")
            #expect(stored.userID == "000123.abc")
            #expect(stored.credentialKind == .refreshToken)
            #expect(stored.hasCredential)

            let replay = try await fixture.run(arguments)
            #expect(replay.status == 0, "\(replay.stderr)")
            let again = try #require(try parseJSON(replay.stdout) as? [String: Any])
            #expect(again["created"] as? Bool == false)
            #expect((again["id"] as? String).flatMap(UUID.init(uuidString:)) == id)

            let other = randomToken()
            let otherFile = try fixture.write(other)
            var conflicting = arguments
            conflicting[conflicting.firstIndex(of: file) ?? 0] = otherFile
            let conflict = try await fixture.run(conflicting)
            #expect(conflict.status == 2)
            #expect(conflict.stderr.contains("different credential"), "\(conflict.stderr)")
            #expect(conflict.stdout.isEmpty)
            expectNothingLeaked(conflict, [token, other])
            #expect(try await fixture.requestCount() == 1)

            // The audit trail names the operator.
            let rows = try await fixture.database.client.query(
                "SELECT actor FROM revoker.audit_events WHERE request_id = \(id)",
                logger: CLIFixture.logger
            ).collect()
            let actors = try rows.map { try $0.decode(String.self) }
            #expect(actors.count == 1)
            #expect(actors.allSatisfy { $0.hasPrefix("cli:") && $0.count > 4 })
        }
    }

    @Test("enqueues from standard input and prints the id for people")
    func fromStandardInput() async throws {
        try await CLIFixture.with { fixture in
            let token = randomToken()
            let result = try await fixture.run(
                [
                    "enqueue", "--client-id", "com.example.app", "--reference", "user-2", "--kind", "authorization-code",
                    "--redirect-uri", "https://example.com/callback", "--credential-stdin", "--max-attempts", "3",
                ],
                stdin: Data("  \(token)\n".utf8)
            )
            #expect(result.status == 0, "\(result.stderr)")
            expectNothingLeaked(result, [token])
            #expect(result.stdout.hasPrefix("Enqueued "), "\(result.stdout)")
            let requests = try await fixture.queue().list(RevocationFilter(externalReference: "user-2"))
            let request = try #require(requests.first)
            #expect(requests.count == 1)
            #expect(result.stdout.contains(request.id.uuidString.lowercased()))
            #expect(request.credentialKind == .authorizationCode)
            #expect(request.redirectURI == "https://example.com/callback")
            #expect(request.maxAttempts == 3)
        }
    }

    struct BadInput: Sendable, CustomTestStringConvertible {
        var name: String
        /// Arguments after `enqueue`; `TOKEN` is replaced by the token and `FILE` by a file holding `fileContents`.
        var arguments: [String]
        var fileContents: String?
        var stdin: String?
        /// What the message must mention.
        var mentions: String
        var testDescription: String { name }
    }

    static let base = ["--client-id", "com.example.app", "--reference", "user-9", "--kind", "refresh-token"]
    static let oversized = String(repeating: "A", count: 100 * 1024)

    static let badInputs: [BadInput] = [
        BadInput(
            name: "unknown client id",
            arguments: ["--client-id", "com.unknown.app", "--reference", "u", "--kind", "refresh-token", "--credential-file", "FILE"],
            fileContents: "TOKEN",
            mentions: "not a configured app"
        ),
        BadInput(name: "empty token file", arguments: base + ["--credential-file", "FILE"], fileContents: " \n\n", mentions: "empty"),
        BadInput(name: "token as a positional argument", arguments: base + ["TOKEN"], mentions: "command line"),
        BadInput(
            name: "token besides a file",
            arguments: base + ["--credential-file", "FILE", "TOKEN"],
            fileContents: "TOKEN",
            mentions: "command line"
        ),
        BadInput(name: "token as an unknown option", arguments: base + ["--token=TOKEN"], mentions: "command line"),
        BadInput(name: "token after --", arguments: base + ["--credential-stdin", "--", "TOKEN"], stdin: "TOKEN", mentions: "command line"),
        BadInput(
            name: "token as --kind",
            arguments: ["--client-id", "com.example.app", "--reference", "u", "--kind", "TOKEN", "--credential-stdin"],
            stdin: "TOKEN",
            mentions: "--kind"
        ),
        BadInput(name: "token as the credential file path", arguments: base + ["--credential-file", "TOKEN"], mentions: "does not exist"),
        BadInput(
            name: "token with a required option missing",
            arguments: ["--client-id", "com.example.app", "--kind", "refresh-token", "TOKEN"],
            mentions: "reference"
        ),
        BadInput(name: "oversized file", arguments: base + ["--credential-file", "FILE"], fileContents: oversized, mentions: "bytes"),
        BadInput(name: "oversized standard input", arguments: base + ["--credential-stdin"], stdin: oversized, mentions: "bytes"),
        BadInput(
            name: "endless device as the credential file",
            arguments: base + ["--credential-file", "/dev/zero"],
            mentions: "larger than 8192 bytes"
        ),
        BadInput(name: "token with an inner space", arguments: base + ["--credential-stdin"], stdin: "TOKEN TOKEN", mentions: "whitespace"),
        BadInput(name: "no credential source", arguments: base, mentions: "--credential-file"),
        BadInput(
            name: "both credential sources",
            arguments: base + ["--credential-stdin", "--credential-file", "FILE"],
            fileContents: "TOKEN",
            stdin: "TOKEN",
            mentions: "exactly one"
        ),
        BadInput(
            name: "redirect uri with a refresh token",
            arguments: base + ["--redirect-uri", "https://example.com/cb", "--credential-stdin"],
            stdin: "TOKEN",
            mentions: "--redirect-uri"
        ),
    ]

    // Every case against one stack: a stack per case, all at once, was a burst the suite hung in.
    @Test("refuses bad input with a clear message, without echoing the token, storing nothing")
    func refusesBadInput() async throws {
        try await CLIFixture.with { fixture in
            for input in Self.badInputs {
                let token = randomToken()
                let file = try input.fileContents.map { try fixture.write($0.replacingOccurrences(of: "TOKEN", with: token)) }
                let arguments =
                    ["enqueue"]
                    + input.arguments.map { argument in
                        argument == "FILE" ? (file ?? "") : argument.replacingOccurrences(of: "TOKEN", with: token)
                    }
                let stdin = input.stdin.map { $0.replacingOccurrences(of: "TOKEN", with: token) }
                let result =
                    if let stdin, stdin.utf8.count > 8192 {
                        try await fixture.run(arguments, stdinFile: try fixture.write(stdin))
                    } else {
                        try await fixture.run(arguments, stdin: stdin.map { Data($0.utf8) })
                    }
                // Our refusals exit 2; ArgumentParser's own usage errors exit 64.
                #expect(
                    result.status == 2 || (input.name.contains("missing") && result.status == 64),
                    "\(input.name): status \(result.status): \(result.stderr)"
                )
                #expect(result.stderr.contains(input.mentions), "\(input.name): \(result.stderr)")
                #expect(result.stdout.isEmpty, "\(input.name): \(result.stdout)")
                expectNothingLeaked(result, [token, String(token.prefix(20))])
                if input.fileContents == Self.oversized || input.stdin == Self.oversized {
                    expectNothingLeaked(result, [String(Self.oversized.prefix(64))])
                }
                #expect(try await fixture.requestCount() == 0, "\(input.name)")
            }
        }
    }

    @Test("--help explains every option and shows an example, without the hidden catch-all")
    func help() async throws {
        let result = try await RevokerProcess.run(["enqueue", "--help"], environment: [:])
        #expect(result.status == 0)
        for option in [
            "--client-id", "--reference", "--apple-user-id", "--redirect-uri", "--kind", "--credential-file", "--credential-stdin", "--max-attempts",
            "--json", "Example",
        ] {
            #expect(result.stdout.contains(option), "\(option) missing from help")
        }
        #expect(!result.stdout.contains("unrecognized"))
    }
}

@Suite("revoker enqueue --id-token-file")
struct EnqueueIdentityTokenTests {
    @Test("binds the request to the verified sub of the user's identity token; refuses one that does not verify")
    func identityTokenFile() async throws {
        try await RevokerTestStack.with(apps: [.apple: ["com.example.app"]]) { stack in
            let fixture = CLIFixture(database: stack.database, configuration: stack.files, environment: stack.environment)
            let admin = stack.sandbox.admin
            let token = randomToken()
            let credential = try fixture.write(token)
            let wrong = try await admin.mintIdentityToken(.init(subject: "000777.cli", audience: "com.example.other"))
            let good = try await admin.mintIdentityToken(.init(subject: "000777.cli", audience: "com.example.app"))
            let base = [
                "enqueue", "--client-id", "com.example.app", "--reference", "user-t", "--kind", "refresh-token", "--credential-file", credential,
            ]

            let refused = try await fixture.run(base + ["--id-token-file", try fixture.write(wrong)])
            #expect(refused.status == 2)
            #expect(refused.stderr.contains("wrong_audience"), "\(refused.stderr)")
            expectNothingLeaked(refused, [token, wrong])
            #expect(try await stack.requests().isEmpty)

            let twice = try await fixture.run(base + ["--id-token-file", credential, "--user-id", "x"])
            #expect(twice.status == 2 && twice.stderr.contains("once"), "\(twice.stderr)")

            let accepted = try await fixture.run(base + ["--id-token-file", try fixture.write(good), "--json"])
            #expect(accepted.status == 0, "\(accepted.stderr)")
            expectNothingLeaked(accepted, [token, good])
            let request = try #require(try await stack.requests().first)
            #expect(request.userID == "000777.cli")
            let enqueued = try await stack.audit().first { $0.event == "enqueued" }
            #expect(enqueued?.detail == "provider=apple kind=refresh_token user=verified_id_token")
        }
    }
}
