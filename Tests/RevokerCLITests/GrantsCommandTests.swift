import AppleSignInSandbox
import FacebookLogin
import FacebookLoginSandbox
import Foundation
import GoogleSignInSandbox
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerEvidence
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// `revoker grants register`, `grants import` and `accounts delete|show` as processes, against a
/// real PostgreSQL and both sandboxes over real HTTP, with a worker running.
@Suite("revoker grants and accounts")
struct GrantsCommandTests {
    static let notes = "com.example.notes"
    static let web = "1000-notes.apps.googleusercontent.com"
    static let worker: [String: any Sendable] = [
        "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "concurrency": 4,
    ]

    static func with<T: Sendable>(serving: Bool = true, _ body: (RevokerTestStack) async throws -> T) async throws -> T {
        try await RevokerTestStack.with(apps: [.google: [web]], worker: worker, serving: serving ? .worker : []) { stack in
            try await body(stack)
        }
    }

    static func grants(_ stack: RevokerTestStack) async throws -> [(reference: String, state: String, user: String?)] {
        try await stack.database.client.query(
            "SELECT account_reference, state, user_id FROM revoker.grants ORDER BY account_reference, created_at",
            logger: stack.logger
        ).collect().map { try $0.decode((String, String, String?).self) }
    }

    @Test func registerExchangesACodeAtOnceHoldsATokenAndSaysWhenACodeFails() async throws {
        try await Self.with { stack in
            let code = try await stack.sandbox.admin.mintCode(clientID: Self.notes, subject: "apple-user-7")
            let token = try await stack.sandbox.google.mintRefreshToken(clientID: Self.web, subject: "google-user-7")
            stack.secrets.add(code.value)
            stack.secrets.add(token.value)
            let arguments = [
                "grants", "register", "--client-id", Self.notes, "--account-reference", "user-7", "--kind", "authorization-code",
                "--credential-stdin", "--wait", "60", "--json",
            ]
            let held = try await RevokerProcess.run(arguments, environment: stack.environment, stdin: Data(code.value.utf8))
            #expect(held.status == 0, "\(held.stderr)")
            let object = try #require(try parseJSON(held.stdout) as? [String: Any])
            let grant = try #require(object["grant"] as? [String: Any])
            #expect(object["created"] as? Bool == true)
            #expect(grant["state"] as? String == "held", "a worker exchanged it within the wait")
            #expect(grant["user_id"] as? String == "apple-user-7", "bound to the verified sub")
            #expect(try await stack.sandbox.admin.grant(code.grantID).codeExchanges == 1)

            // The same code again is the same grant, and no second exchange.
            let again = try await RevokerProcess.run(arguments, environment: stack.environment, stdin: Data(code.value.utf8))
            #expect(again.status == 0, "\(again.stderr)")
            let second = try #require(try parseJSON(again.stdout) as? [String: Any])
            #expect(second["created"] as? Bool == false)
            #expect((second["grant"] as? [String: Any])?["id"] as? String == grant["id"] as? String)
            #expect(try await stack.sandbox.admin.grant(code.grantID).codeExchanges == 1)

            // A Google refresh token is held once a worker validated it.
            let file = try stack.files.write(token.value)
            let google = try await RevokerProcess.run(
                [
                    "grants", "register", "--provider", "google", "--client-id", Self.web, "--account-reference", "user-7",
                    "--kind", "refresh-token", "--credential-file", file,
                ],
                environment: stack.environment
            )
            #expect(google.status == 0, "\(google.stderr)")
            #expect(google.stdout.hasPrefix("Registered grant "), "\(google.stdout)")
            #expect(google.stdout.contains("google \(Self.web), held"), "\(google.stdout)")

            // A code the sandbox does not know fails truthfully (exit 1, end_reason code_rejected).
            let unknown = "c" + UUID().uuidString.lowercased()
            let failed = try await RevokerProcess.run(
                [
                    "grants", "register", "--client-id", Self.notes, "--account-reference", "user-8", "--kind", "authorization-code",
                    "--credential-stdin", "--wait", "60",
                ],
                environment: stack.environment,
                stdin: Data(unknown.utf8)
            )
            #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
            #expect(failed.stdout.contains("failed (code_rejected)"), "\(failed.stdout)")

            // Refusals name the problem and store nothing; a token is never echoed.
            let pasted = try await RevokerProcess.run(
                ["grants", "register", "--client-id", Self.notes, "--account-reference", "user-9", "--kind", "refresh-token", unknown],
                environment: stack.environment
            )
            #expect(pasted.status == 2)
            #expect(pasted.stderr.contains("Never put a credential on the command line"), "\(pasted.stderr)")
            let access = try await RevokerProcess.run(
                [
                    "grants", "register", "--client-id", Self.notes, "--account-reference", "user-9", "--kind", "access-token",
                    "--credential-stdin",
                ],
                environment: stack.environment,
                stdin: Data(unknown.utf8)
            )
            #expect(access.status == 2)
            #expect(access.stderr.contains("--provider apple takes authorization-code or refresh-token only"), "\(access.stderr)")
            for result in [held, again, google, failed, pasted, access] {
                try stack.expectNoSecrets(in: result.stdout + result.stderr)
                #expect(!(result.stdout + result.stderr).contains(unknown))
            }
            #expect(try await Self.grants(stack).map(\.reference) == ["user-7", "user-7", "user-8"])
        }
    }

    @Test func importTakesGoodLinesReportsBadOnesByNumberAndResumes() async throws {
        try await Self.with(serving: false) { stack in
            let tokens = (0..<5).map { _ in "r" + UUID().uuidString.lowercased() }
            for token in tokens { stack.secrets.add(token) }
            func line(_ fields: [String: String]) throws -> String {
                String(decoding: try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]), as: UTF8.self)
            }
            let lines = [
                try line(["account_reference": "a-1", "refresh_token": tokens[0], "user_id": "sub-1"]),
                try line(["account_reference": "a-2", "refresh_token": tokens[1], "provider": "google", "client_id": Self.web]),
                "",
                "{\"account_reference\": \"a-3\", \"refresh_token\": \"\(tokens[2])\"",  // cut short
                try line(["account_reference": "a-4"]),
                try line(["account_reference": "a-5", "refresh_token": tokens[3], "client_id": "com.example.unknown"]),
                try line(["account_reference": "a-6", "authorization_code": tokens[4]]),
                try line(["account_reference": "a-7", "refresh_token": tokens[2]]),
                String(repeating: "x", count: 20_000),
                try line(["account_reference": "a-8", "refresh_token": tokens[0]]),  // held for a-1
            ]
            let file = try stack.files.write(lines.joined(separator: "\n") + "\n")
            let arguments = ["grants", "import", "--file", file, "--client-id", Self.notes]
            let first = try await RevokerProcess.run(arguments, environment: stack.environment)
            #expect(first.status == 1, "\(first.stderr)")
            let refused = first.stdout.split(separator: "\n").filter { $0.hasPrefix("line ") }
            #expect(
                refused == [
                    "line 4: refused: the line is not well-formed JSON: an object is not closed.",
                    "line 5: refused: refresh_token is missing (import takes refresh tokens, or access tokens where a provider's grants are one; register codes at sign-in).",
                    "line 6: refused: client_id com.example.unknown is not a configured apple app.",
                    "line 7: refused: it has a field other than provider, client_id, account_reference, refresh_token, access_token, user_id.",
                    "line 9: refused: the line is longer than 16384 bytes.",
                    "line 10: refused: this refresh token is held for another account or provider.",
                ],
                "\(first.stdout)"
            )
            #expect(first.stdout.contains("Imported 10 lines: 3 taken in, 0 already taken in, 6 refused."), "\(first.stdout)")
            let held = try await Self.grants(stack)
            #expect(held.map(\.reference) == ["a-1", "a-2", "a-7"])
            #expect(held.allSatisfy { $0.state == "pending" }, "held once a worker validated each (none runs here)")
            #expect(held.first?.user == "sub-1")
            try stack.expectNoSecrets(in: first.stdout + first.stderr)

            // The progress record makes a second run continue after the last line; --restart reads it all again.
            let resumed = try await RevokerProcess.run(arguments, environment: stack.environment)
            #expect(resumed.stderr.contains("resuming after line 10"), "\(resumed.stderr)")
            let restarted = try await RevokerProcess.run(arguments + ["--restart", "--json"], environment: stack.environment)
            #expect(restarted.status == 1)
            let summary = try #require(
                try parseJSON(String(restarted.stdout.split(separator: "\n").last ?? "")) as? [String: Any]
            )
            #expect(summary["held"] as? Int == 0)
            #expect(summary["existing"] as? Int == 3, "importing again is idempotent")
            #expect(try await Self.grants(stack).count == 3)

            // A changed file is not resumed blindly.
            try Data((lines.dropFirst().joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let changed = try await RevokerProcess.run(arguments, environment: stack.environment)
            #expect(changed.status == 2)
            #expect(changed.stderr.contains("not the one this progress record was made from"), "\(changed.stderr)")
        }
    }

    @Test func anImportKilledMidwayResumesWithoutLosingOrDoublingAGrant() async throws {
        try await Self.with(serving: false) { stack in
            let count = 1500
            var text = ""
            for index in 0..<count {
                text += "{\"account_reference\": \"k-\(index)\", \"refresh_token\": \"rt-\(UUID().uuidString.lowercased())\"}\n"
            }
            let file = try stack.files.write(text)
            let arguments = ["grants", "import", "--file", file, "--client-id", Self.notes]
            let first = try RevokerProcess(arguments, environment: stack.environment)
            try await eventually("some batches were recorded", every: .milliseconds(20)) {
                guard first.isRunning else { throw CannotHappen("the import ended before it could be killed: \(first.stdoutSoFar)") }
                return
                    ((try? Data(contentsOf: URL(fileURLWithPath: file + ".import-progress"))).flatMap {
                        try? JSONDecoder().decode(GrantImport.Progress.self, from: $0)
                    }?.lines ?? 0) >= 3 * GrantImport.batchSize
            }
            first.signal(SIGKILL)
            #expect(try await first.wait().signalled)
            let record = try JSONDecoder().decode(GrantImport.Progress.self, from: Data(contentsOf: URL(fileURLWithPath: file + ".import-progress")))
            let heldAtKill = try await Self.grants(stack).count
            #expect(heldAtKill >= record.lines && heldAtKill < count, "killed midway: \(record.lines) recorded, \(heldAtKill) held")

            let second = try await RevokerProcess.run(arguments + ["--json"], environment: stack.environment)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("resuming after line \(record.lines)"), "\(second.stderr)")
            let summary = try #require(try parseJSON(String(second.stdout.split(separator: "\n").last ?? "")) as? [String: Any])
            #expect(summary["lines"] as? Int == count)
            let (new, existing) = (summary["held"] as? Int ?? -1, summary["existing"] as? Int ?? -1)
            #expect(new + existing == count && existing <= heldAtKill - record.lines, "only lines after the record are read again")
            let grants = try await Self.grants(stack)
            #expect(grants.count == count && Set(grants.map(\.reference)).count == count, "every line taken in once")
            #expect(grants.allSatisfy { $0.state == "pending" }, "each waits for a worker to validate it (none runs here)")
            print("import kill test: \(record.lines) lines recorded at SIGKILL, \(heldAtKill) held, \(existing) read again as existing")
        }
    }

    /// Facebook's grants from the command line: a person's access token (proven at the Graph API)
    /// and a Limited Login token (verified here, held as it is); a forged Limited Login token and
    /// a kind Facebook does not issue are refused with exit 2 and nothing stored.
    @Test func registerTakesAFacebookAccessTokenAndALimitedLoginToken() async throws {
        let app = "1234567890123456"
        try await RevokerTestStack.with(apps: [.facebook: [app]], worker: Self.worker, serving: .worker) { stack in
            let facebook = FacebookSandboxAdmin(baseURL: stack.sandbox.baseURL + FacebookSandbox.prefix, httpClient: stack.sandbox.httpClient)
            let person = try await facebook.signIn(appID: app, userID: "6001")
            let limited = try await facebook.limitedLoginToken(.init(appID: app, subject: "6002"))
            let forged = try await facebook.limitedLoginToken(.init(appID: app, subject: "6003", signature: .forged))
            for secret in [person.value, limited.value, forged.value] { stack.secrets.add(secret) }
            func register(_ reference: String, _ kind: String, _ secret: String) async throws -> RevokerProcess.Result {
                try await RevokerProcess.run(
                    [
                        "grants", "register", "--provider", "facebook", "--client-id", app, "--account-reference", reference, "--kind", kind,
                        "--credential-stdin", "--wait", "60", "--json",
                    ],
                    environment: stack.environment,
                    stdin: Data(secret.utf8)
                )
            }
            for (reference, kind, secret, user) in [
                ("fb-7", "access-token", person.value, "6001"), ("fb-8", "identity-token", limited.value, "6002"),
            ] {
                let held = try await register(reference, kind, secret)
                #expect(held.status == 0, "\(kind): \(held.stderr)")
                let grant = try #require((try parseJSON(held.stdout) as? [String: Any])?["grant"] as? [String: Any], "\(held.stdout)")
                #expect(grant["state"] as? String == "held" && grant["user_id"] as? String == user, "\(kind): \(grant)")
                #expect(grant["user_source"] as? String == "verified_id_token", "\(kind): \(grant)")
            }
            let refused = try await register("fb-9", "identity-token", forged.value)
            #expect(refused.status == 2 && refused.stderr.contains("did not verify"), "\(refused.stderr)")
            let refresh = try await register("fb-9", "refresh-token", person.value)
            #expect(
                refresh.status == 2 && refresh.stderr.contains("--provider facebook takes access-token or identity-token only"),
                "\(refresh.stderr)"
            )
            for result in [refused, refresh] { try stack.expectNoSecrets(in: result.stdout + result.stderr) }
            #expect(try await Self.grants(stack).map(\.reference) == ["fb-7", "fb-8"])

            // Tokens a backend already holds: a Facebook grant is imported as the person's access token.
            let other = try await facebook.signIn(appID: app, userID: "6004")
            stack.secrets.add(other.value)
            let lines = [
                #"{"account_reference": "fb-10", "access_token": "\#(other.value)"}"#,
                #"{"account_reference": "fb-11", "refresh_token": "\#(other.value)"}"#,
            ]
            let imported = try await RevokerProcess.run(
                ["grants", "import", "--provider", "facebook", "--client-id", app],
                environment: stack.environment,
                stdin: Data(lines.joined(separator: "\n").utf8)
            )
            #expect(imported.status == 1, "\(imported.stdout) \(imported.stderr)")
            #expect(
                imported.stdout.contains("line 2") && imported.stdout.contains("grants are imported as access_token, not refresh_token"),
                "\(imported.stdout)"
            )
            try stack.expectNoSecrets(in: imported.stdout + imported.stderr)
            try await eventually("the imported access token is held") {
                try await Self.grants(stack).contains { $0.reference == "fb-10" && $0.state == "held" && $0.user == "6004" }
            }
        }
    }

    @Test func deletingAnAccountFromTheCommandLineRevokesEachHeldGrantOnce() async throws {
        try await Self.with { stack in
            let apple = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "apple-user-3")
            let google = try await stack.sandbox.google.mintRefreshToken(clientID: Self.web, subject: "google-user-3")
            stack.secrets.add(apple.value)
            stack.secrets.add(google.value)
            let lines = [
                "{\"account_reference\": \"user-3\", \"refresh_token\": \"\(apple.value)\", \"user_id\": \"apple-user-3\"}",
                "{\"account_reference\": \"user-3\", \"refresh_token\": \"\(google.value)\", \"provider\": \"google\", \"client_id\": \"\(Self.web)\"}",
            ]
            let imported = try await RevokerProcess.run(
                ["grants", "import", "--client-id", Self.notes],
                environment: stack.environment,
                stdin: Data(lines.joined(separator: "\n").utf8)
            )
            #expect(imported.status == 0, "\(imported.stdout) \(imported.stderr)")
            // The running worker validates each, then holds it.
            try await eventually("both grants held") { try await Self.grants(stack).allSatisfy { $0.state == "held" } }

            let shown = try await RevokerProcess.run(["accounts", "show", "--account-reference", "user-3"], environment: stack.environment)
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(shown.stdout.hasPrefix("user-3: 2 grants, 0 deletions"), "\(shown.stdout)")
            #expect(shown.stdout.contains("apple \(Self.notes), held, user apple-user-3"), "\(shown.stdout)")

            let deleted = try await RevokerProcess.run(
                ["accounts", "delete", "--account-reference", "user-3", "--wait", "60", "--json"],
                environment: stack.environment
            )
            #expect(deleted.status == 0, "\(deleted.stderr)")
            let object = try #require(try parseJSON(deleted.stdout) as? [String: Any])
            let deletion = try #require(object["deletion"] as? [String: Any])
            #expect(object["created"] as? Bool == true)
            #expect(deletion["state"] as? String == "completed")
            #expect(deletion["outcome"] as? String == "revoked")
            let fates = try #require(deletion["grants"] as? [[String: Any]])
            #expect(fates.map { $0["state"] as? String } == ["revoked", "revoked"])
            #expect(try await stack.sandbox.admin.grant(apple.grantID).revokeCalls == 1)
            #expect(try await stack.sandbox.google.grant(google.grantID).revoked)

            let nothing = try await RevokerProcess.run(["accounts", "delete", "--account-reference", "user-none"], environment: stack.environment)
            #expect(nothing.status == 0, "\(nothing.stderr)")
            #expect(nothing.stdout.contains(": completed, nothing_held"), "\(nothing.stdout)")
            let unknown = try await RevokerProcess.run(
                ["accounts", "delete", "--account-reference", "user-3", "--client-id", "com.example.unknown"],
                environment: stack.environment
            )
            #expect(unknown.status == 2)
            #expect(unknown.stderr.contains("--client-id com.example.unknown is not a configured app"), "\(unknown.stderr)")

            let after = try await RevokerProcess.run(["accounts", "show", "--account-reference", "user-3"], environment: stack.environment)
            #expect(after.stdout.contains("user-3: 2 grants, 1 deletion"), "\(after.stdout)")
            #expect(after.stdout.contains("apple \(Self.notes), revoked, user apple-user-3"), "\(after.stdout)")
            try await Self.expectAnAccountReceipt(stack, account: "user-3", grants: 2)
            try await Self.expectAnAccountReceipt(stack, account: "user-none", grants: 0)

            let status = try await RevokerProcess.run(["status", "--json"], environment: stack.environment)
            #expect(status.status == 0, "\(status.stderr)")
            let counts = try #require((try parseJSON(status.stdout) as? [String: Any])?["grants"] as? [String: [String: Int]])
            #expect(counts["apple"]?["revoked"] == 1 && counts["google"]?["revoked"] == 1 && counts["apple"]?["held"] == 0, "\(counts)")
            let table = try await RevokerProcess.run(["status"], environment: stack.environment)
            #expect(table.stdout.contains("Grants in custody by provider and state (0 deletions pending)"), "\(table.stdout)")
            for result in [imported, shown, deleted, nothing, unknown, after, status, table] {
                try stack.expectNoSecrets(in: result.stdout + result.stderr)
            }
        }
    }
}

extension GrantsCommandTests {
    /// The account's receipt verifies offline with the public key alone; a changed byte, or a
    /// request's receipt left out (even when signed again with the real key), fails.
    static func expectAnAccountReceipt(_ stack: RevokerTestStack, account: String, grants: Int) async throws {
        let directory = stack.files.directory
        let keyFile = directory.appendingPathComponent("audit-public-key.pem").path
        let publicKey = try await RevokerProcess.run(["audit", "public-key"], environment: stack.environment)
        try Data(publicKey.stdout.utf8).write(to: URL(fileURLWithPath: keyFile))
        let issued = try await RevokerProcess.run(["audit", "receipt", "--account", account], environment: stack.environment)
        #expect(issued.status == 0, "\(issued.stderr)")
        let receipt = try JSONDecoder().decode(AccountReceipt.self, from: Data(issued.stdout.utf8))
        #expect(receipt.summary.accountReference == account)
        #expect(receipt.summary.outcome == (grants == 0 ? "nothing_held" : "revoked"))
        #expect(receipt.summary.grants.count == grants)
        #expect(receipt.summary.grants.allSatisfy { $0.state == "revoked" && $0.outcome == "revoked" && $0.requestID != nil })
        #expect(receipt.requests.count == 2 * grants, "each grant's revocation and its hold")
        #expect(receipt.requests.allSatisfy { $0.summary.outcome == "revoked" || $0.summary.outcome == "held" })

        let offline = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        let file = try stack.files.write(issued.stdout)
        let good = try await RevokerProcess.run(["audit", "verify-receipt", file, "--public-key", keyFile], environment: offline)
        #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
        #expect(good.stdout.hasPrefix("Account receipt valid: deletion \(receipt.summary.deletionID) of \(account)"), "\(good.stdout)")
        guard grants > 0 else { return }

        let changed = issued.stdout.replacingOccurrences(of: "\"state\" : \"revoked\"", with: "\"state\" : \"revokeD\"")
        let bad = try await RevokerProcess.run(
            ["audit", "verify-receipt", try stack.files.write(changed), "--public-key", keyFile],
            environment: offline
        )
        #expect(bad.status == 1 && bad.stdout.contains("Account receipt NOT valid"), "\(bad.stdout)")
        let key = try AuditSigningKey(pemRepresentation: String(contentsOfFile: stack.files.auditSigningKeyFile, encoding: .utf8))
        let revocations = Set(receipt.summary.grants.compactMap(\.requestID))
        let partial = try AccountReceipt.issue(
            deletion: receipt.deletion,
            requests: receipt.requests.filter { !revocations.contains($0.summary.requestID) },
            issuedAtMicros: 0,
            key: key
        )
        let missing = try await RevokerProcess.run(
            [
                "audit", "verify-receipt", try stack.files.write(String(decoding: try partial.canonicalBytes(), as: UTF8.self)), "--public-key",
                keyFile,
            ],
            environment: offline
        )
        #expect(missing.status == 1 && missing.stdout.contains("has no receipt here"), "\(missing.stdout)")
    }
}

extension LocalConfiguration {
    /// Writes `text` to a new file in the configuration directory and returns its path.
    func write(_ text: String, name: String = UUID().uuidString) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
