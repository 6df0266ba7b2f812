import AppleSignInSandbox
import Crypto
import Foundation
import GoogleSignInSandbox
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
import ProviderSandbox
#endif

/// Every `revoker` command the docs show, run as printed (through `sh`, in a directory that
/// holds the files the commands name), against a scratch database with the sandboxes standing
/// in for Apple and Google. The `scripts/` commands are run by CI itself (`.ci/run`).
@Suite("Documented commands")
struct DocumentedCommandTests {
    /// The README, then the guides in the order one sets Revoker up and uses it (each finds what
    /// an earlier one made: the schema, the keys, a request to receipt), then every other doc.
    static func documents() throws -> [String] {
        let guides = ["README.md", "docs/operations.md", "docs/providers.md", "docs/integration.md", "docs/audit.md", "docs/development.md"]
        return guides + (try Documentation.docs()).filter { !guides.contains($0) }
    }

    /// Commands the docs name that this test leaves to others, and why.
    static let leftToOthers: [String: String] = [
        "revoker demo": "scripts/demo runs it in CI",
        // Names of a command or an option in prose, never a whole command line.
        "revoker enqueue": "names the command; docs/integration.md and docs/providers.md show it whole",
        "revoker enqueue --provider": "names the option; docs/providers.md shows it whole",
        "revoker audit verify-receipt": "names the command; docs/audit.md shows it whole",
        "revoker audit verify-archive": "names the command; docs/audit.md shows it whole",
        "revoker audit archive": "names the command; docs/audit.md shows it whole",
        "revoker audit verify --witness": "names the option; docs/audit.md shows it whole",
        "revoker prune": "names the command; docs/operations.md shows it whole",
        "revoker api-key … --client-id": "names the option; docs/integration.md shows it whole",
        // Placeholders for what the reader has at hand.
        "revoker audit --request-id UUID": "UUID stands for a request's id",
        "revoker prune --older-than-days N": "N stands for a number of days; docs/operations.md runs it with 90",
        "revoker audit archive --before YYYY-MM --out FILE": "placeholders; AuditArchiveCommandTests runs docs/audit.md's line",
        "revoker audit receipt ID --archive FILE": "placeholders; AuditArchiveCommandTests runs docs/audit.md's line",
        "revoker audit archive --before 2025-12": "a step of the history benchmark, on its own database of years",
        "revoker audit verify --witness PATH": "PATH stands for the witness's file; AuditVerifyCommandTests runs --witness with one",
        "revoker audit verify --witness /var/lib/revoker-witness/checkpoints.jsonl":
            "the runbook's deployed witness path; AuditVerifyCommandTests runs --witness with a file it kept",
    ].merging(AuditArchiveCommandTests.archiveCommands.map { ($0, "AuditArchiveCommandTests runs them on months before 2026-01") }) { $1 }

    /// Commands left to others with every option they are shown with, and why.
    static let leftToOthersWithAnyOptions: [String: String] = [
        "revoker bench": "a benchmark takes minutes; scripts/bench runs it, the smoke run is in this suite"
    ]

    static func isLeftToOthers(_ command: String) -> Bool {
        leftToOthers.keys.contains(command) || leftToOthersWithAnyOptions.keys.contains { command == $0 || command.hasPrefix($0 + " ") }
    }

    /// Long-running commands: started, seen ready, then stopped with SIGTERM (they must exit 0).
    static let servers: [String: String] = [
        "revoker serve": "Serving the API",
        "revoker sandbox": "Apple sandbox listening on",
        "revoker work": "",
        "revoker events --follow": "following events",
    ]

    /// The commands, in the order the docs show them: shell code blocks and inline code that
    /// starts with `revoker <command>` or runs one.
    static func commands() throws -> [String] {
        try documents().flatMap { try commands(in: Documentation.read($0)) }
    }

    static func commands(in text: String) -> [String] {
        var commands: [String] = []
        for segment in Documentation.segments(in: text) {
            switch segment {
            case .code("sh", let body):
                let joined = body.replacingOccurrences(of: "\\\n", with: " ")
                commands += joined.split(separator: "\n").map { line in
                    String(line.split(separator: "#", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces)
                }
            case .code:
                break
            case .prose(let prose):
                // Inline code: every other stretch between backticks.
                let parts = prose.split(separator: "`", omittingEmptySubsequences: false)
                commands += stride(from: 1, to: parts.count - 1, by: 2).map { String(parts[$0]) }
            }
        }
        return commands.map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }.filter { command in
            command.hasPrefix("revoker ") || command.hasPrefix("swift run revoker ") || command.hasPrefix("(umask 077; revoker ")
        }
    }

    @Test func theDocsShowTheCommandsThisTestRuns() throws {
        let commands = try Self.commands()
        for expected in ["revoker migrate", "revoker check", "revoker status", "revoker work", "revoker drain", "revoker serve", "revoker audit"] {
            #expect(commands.contains { $0.hasPrefix(expected) }, "\(expected) is documented")
        }
        #expect(commands.contains { $0.hasPrefix("revoker enqueue") && $0.contains("--kind refresh_token") })
        // An exemption whose command no doc shows any more is one to remove.
        for command in Self.leftToOthers.keys.sorted() { #expect(commands.contains(command), "no doc shows \(command) any more") }
        for command in Self.leftToOthersWithAnyOptions.keys.sorted() {
            #expect(commands.contains { $0 == command || $0.hasPrefix(command + " ") }, "no doc shows \(command) any more")
        }
    }

    @Test func everyCommandTheDocsShowRunsAsPrinted() async throws {
        let commands = try Self.commands()
        try await ScratchDatabase.withScratchDatabase(.empty) { database in
            try await RunningSandbox.with { sandbox in
                let google = "123456789012-web.apps.googleusercontent.com"
                let files = try LocalConfiguration(apps: [.apple: ["com.example.app"], .google: [google]])
                defer { try? FileManager.default.removeItem(at: files.directory) }
                try await files.register(with: sandbox)
                // The files the commands name, where they name them.
                let work = files.directory.appendingPathComponent("work")
                try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
                let token = try await sandbox.admin.mintRefreshToken(clientID: "com.example.app", subject: "000123.abcdef")
                try Data(token.value.utf8).write(to: work.appendingPathComponent("token.txt"))
                try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: work.appendingPathComponent("AuthKey_KEY1234567.p8"))
                let googleToken = try await sandbox.google.mintRefreshToken(clientID: google, subject: "110169484474386276334")
                try Data(googleToken.value.utf8).write(to: work.appendingPathComponent("google-token.txt"))
                try Data("GOCSPX-readme-sandbox\n".utf8).write(to: work.appendingPathComponent("google-client-secret.txt"))
                let held = try await sandbox.admin.mintRefreshToken(clientID: "com.example.app", subject: "000777.abcdef")
                try Data("{\"account_reference\": \"user-7\", \"refresh_token\": \"\(held.value)\"}\n".utf8)
                    .write(to: work.appendingPathComponent("tokens.jsonl"))

                var environment = files.environment(databaseURL: database.url, sandbox: sandbox)
                let binaryDirectory = URL(fileURLWithPath: RevokerProcess.binary).deletingLastPathComponent().path
                environment["PATH"] = binaryDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
                environment["REVOKER_HTTP_PORT"] = "0"

                var ran: [String] = []
                for command in commands {
                    if Self.isLeftToOthers(command) { continue }
                    // `swift run revoker` builds and runs this same binary.
                    let runnable = command.replacingOccurrences(of: "swift run revoker", with: "revoker")
                    let server = Self.servers.first { runnable.hasPrefix($0.key) }
                    let process = try RevokerProcess.Handle(
                        executable: "/bin/sh",
                        arguments: ["-c", server == nil ? runnable : "exec " + runnable],
                        environment: environment,
                        workingDirectory: work
                    )
                    if let server {
                        if server.value.isEmpty {
                            // The worker has done its part when it has carried out everything due
                            // (and has been up long enough to have its signal handlers).
                            try await Task.sleep(for: .seconds(2))
                            try await Self.waitUntilNothingIsDue(database.client)
                        } else {
                            try await Self.wait(for: server.value, in: process)
                        }
                        #expect(process.isRunning, "\(command) keeps running: \(process.errors)")
                        process.signal(SIGTERM)
                    }
                    try await eventually("\(command) ends: \(process.output)\(process.errors)") { !process.isRunning }
                    if process.terminationStatus != 0 {
                        let waiting = try await Self.waiting(database.client)
                        Issue.record("\(command) exited \(process.terminationStatus): \(process.output)\(process.errors)\nwaiting: \(waiting)")
                    }
                    #expect(!(process.output + process.errors).contains(token.value), "\(command) never prints the token")
                    #expect(!(process.output + process.errors).contains(googleToken.value), "\(command) never prints the Google token")
                    #expect(!(process.output + process.errors).contains(held.value), "\(command) never prints an imported token")
                    ran.append(command)
                }
                #expect(ran.count >= 15, "\(ran)")

                // What the commands should have left behind.
                let keys = work.appendingPathComponent("sealing-keys").path
                let attributes = try FileManager.default.attributesOfItem(atPath: keys)
                #expect((attributes[.posixPermissions] as? Int) == 0o600, "keygen under umask 077 writes a private file")
                let csv = try String(contentsOf: work.appendingPathComponent("january.csv"), encoding: .utf8)
                #expect(csv.hasPrefix("id,occurred_at,"), "the CSV export has its header")
                let rows = try await database.client.query(
                    "SELECT provider, state, outcome FROM revoker.revocation_requests WHERE external_reference = 'user-42' ORDER BY provider"
                ).collect()
                let requests = try rows.map { try $0.decode((String, String, String?).self) }
                #expect(requests.map(\.0) == ["apple", "google"], "the docs enqueue an Apple and a Google grant of user-42")
                for (provider, state, outcome) in requests {
                    #expect(state == "succeeded" && outcome == "revoked", "the enqueued \(provider) deletion was carried out by a documented worker")
                }
                #expect(try await sandbox.google.grant(googleToken.grantID).revocations == 1)
                let imported = try await sandbox.admin.grant(held.grantID)
                #expect(imported.revoked && imported.revokeCalls == 1, "the imported grant of user-7 was revoked by its deletion: \(imported)")
            }
        }
    }

    /// The requests still waiting, described without their credentials: what a failed command left.
    static func waiting(_ client: PostgresClient) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT format('%s %s %s %s attempts=%s due_in=%s lease_owner=%s', provider, external_reference, purpose, state, attempts,
                          run_after - now(), coalesce(lease_owner, '-'))
            FROM revoker.revocation_requests WHERE state IN ('pending', 'running') ORDER BY created_at
            """
        ).collect()
        return try rows.map { try $0.decode(String.self) }
    }

    static func waitUntilNothingIsDue(_ client: PostgresClient) async throws {
        try await eventually("nothing is due") {
            let rows = try await client.query("SELECT count(*)::int FROM revoker.revocation_requests WHERE state IN ('pending', 'running')")
                .collect()
            return try rows.first?.decode(Int.self) == 0
        }
    }

    static func wait(for text: String, in process: RevokerProcess.Handle) async throws {
        try await eventually("it prints '\(text)': \(process.output)\(process.errors)") {
            if (process.output + process.errors).contains(text) { return true }
            guard process.isRunning else { throw CannotHappen("it ended, never printing '\(text)': \(process.output)\(process.errors)") }
            return false
        }
    }
}
