import AppleSignInSandbox
import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
import ProviderSandbox
#endif

/// `deploy/postgres/roles.sql` applied as docs/operations.md says, a login in each of its roles,
/// and every use the docs document for a role carried out as that role: the grants are enough
/// for what the documentation promises.
@Suite("Every documented command as its documented role")
struct RoleCommandTests {
    /// The roles of `deploy/postgres/roles.sql`.
    enum Role: String, CaseIterable, Sendable {
        /// The service: every command that touches the database, except `migrate` (the schema owner's).
        case worker = "revoker_worker"
        /// App backends: the SQL enqueue function, request states, the event feed.
        case enqueuer = "revoker_enqueuer"
        /// Compliance staff: read the audit trail, verify it with the public key alone.
        case auditor = "revoker_auditor"
    }

    /// One documented use of the database. Arguments and binds may name `{placeholders}`:
    /// files the test prepared or an earlier use's output.
    enum Use: Sendable {
        /// `revoker ARGUMENTS…` runs to its end and exits 0; its standard output is kept as
        /// `{saveAs}` when named.
        case command([String], saveAs: String? = nil)
        /// `revoker ARGUMENTS…` gets to work (prints `ready`) and exits 0 on SIGTERM.
        case service([String], ready: String)
        /// A statement on a connection of the role's own, with `binds` as `$1`, `$2`…
        case sql(String, binds: [String] = [])
    }

    /// Where the docs document it, the role, and the use.
    struct Documented: Sendable {
        var doc: String
        var role: Role
        var use: Use
    }

    static let notes = "com.example.notes"

    /// Every use the docs document, by role, in an order where each finds what it needs
    /// (a request to drain, a checkpoint to verify). Add a row when a doc documents one.
    static let documented: [Documented] = [
        // The service's role is `database_url` for every command but `migrate` (deploy/revoker.example.md).
        .init(doc: "integration.md, The HTTP API: revoker serve", role: .worker, use: .service(["serve", "--port", "0"], ready: "Serving the API")),
        .init(
            doc: "integration.md, Enqueueing a deletion (command line)",
            role: .worker,
            use: .command([
                "enqueue", "--client-id", notes, "--reference", "user-42", "--kind", "refresh_token", "--apple-user-id", "000123.abcdef",
                "--credential-file", "{token-file}", "--json",
            ])
        ),
        .init(
            doc: "integration.md, Enqueueing a deletion (the app's own transaction)",
            role: .enqueuer,
            use: .sql(
                "SELECT revoker.enqueue_revocation('com.example.notes', 'user-43', 'refresh_token', $1, apple_user_id => '000124.abcdef')",
                binds: ["{token-2}"]
            )
        ),
        .init(doc: "operations.md, Running the worker: drain", role: .worker, use: .command(["drain"])),
        .init(
            doc: "operations.md, Running the worker: work",
            role: .worker,
            use: .service(["work", "--log-level", "info"], ready: "Worker started")
        ),
        .init(doc: "operations.md, Running the worker: revoker status", role: .worker, use: .command(["status"])),
        .init(doc: "integration.md, Events for the app backend: revoker events", role: .worker, use: .command(["events", "--limit", "100"])),
        .init(doc: "audit.md, Tamper evidence: revoker audit checkpoint", role: .worker, use: .command(["audit", "checkpoint"])),
        .init(
            doc: "audit.md, Tamper evidence: revoker audit public-key",
            role: .worker,
            use: .command(["audit", "public-key"], saveAs: "public-key")
        ),
        .init(doc: "audit.md, The audit trail: revoker audit", role: .worker, use: .command(["audit", "--reference", "user-42"])),
        .init(doc: "audit.md, Tamper evidence: revoker audit verify", role: .worker, use: .command(["audit", "verify"])),
        .init(
            doc: "audit.md, Receipts: revoker audit receipt",
            role: .worker,
            use: .command(["audit", "receipt", "--reference", "user-42"], saveAs: "receipt")
        ),
        .init(doc: "operations.md, Retention: revoker prune", role: .worker, use: .command(["prune", "--older-than-days", "90"])),
        // Compliance staff: "An auditor needs only the public key and read access (revoker_auditor)".
        .init(doc: "audit.md, The audit trail: revoker audit", role: .auditor, use: .command(["audit", "--reference", "user-42"])),
        .init(
            doc: "audit.md, The audit trail: revoker audit",
            role: .auditor,
            use: .command(["audit", "--apple-user-id", "000123.abcdef", "--format", "json"])
        ),
        .init(
            doc: "audit.md, The audit trail: revoker audit",
            role: .auditor,
            use: .command(["audit", "--client-id", notes, "--since", "2026-01-01", "--until", "2026-02-01", "--format", "csv"])
        ),
        .init(
            doc: "audit.md, The audit trail: SQL as revoker_auditor",
            role: .auditor,
            use: .sql("SELECT * FROM revoker.audit_events WHERE external_reference = 'user-42' ORDER BY id")
        ),
        .init(
            doc: "audit.md, Tamper evidence: revoker audit verify",
            role: .auditor,
            use: .command(["audit", "verify", "--public-key", "{public-key}"])
        ),
        .init(
            doc: "audit.md, Tamper evidence: revoker audit verify",
            role: .auditor,
            use: .command(["audit", "verify", "--public-key", "{public-key}", "--since", "2026-01-01", "--json"])
        ),
        .init(
            doc: "audit.md, Receipts: revoker audit verify-receipt",
            role: .auditor,
            use: .command(["audit", "verify-receipt", "{receipt}", "--public-key", "{public-key}"])
        ),
        // The auditor's daily routine: twice, the first run keeping into a witness not there yet.
        .init(
            doc: "audit.md, An auditor's daily routine",
            role: .auditor,
            use: .command(["audit", "verify", "--public-key", "{public-key}", "--witness", "{witness}", "--keep-witness", "{witness}"])
        ),
        .init(
            doc: "audit.md, An auditor's daily routine",
            role: .auditor,
            use: .command(["audit", "verify", "--public-key", "{public-key}", "--witness", "{witness}", "--keep-witness", "{witness}"])
        ),
        .init(
            doc: "audit.md, An auditor's daily routine",
            role: .auditor,
            use: .command(["audit", "verify-receipt", "{receipt}", "--public-key", "{public-key}", "--witness", "{witness}"])
        ),
        // App backends in the same database.
        .init(
            doc: "operations.md, What it needs: revoker_enqueuer reads request states",
            role: .enqueuer,
            use: .sql("SELECT id, state, outcome, finished_at FROM revoker.revocation_requests WHERE external_reference = 'user-43'")
        ),
        .init(doc: "integration.md, Events for the app backend: LISTEN revoker_events", role: .enqueuer, use: .sql("LISTEN revoker_events")),
        .init(
            doc: "integration.md, Events for the app backend: SELECT * FROM revoker.events",
            role: .enqueuer,
            use: .sql(
                "SELECT * FROM revoker.events WHERE (txid, position) > ($1::xid8, $2::bigint) ORDER BY txid, position LIMIT 100",
                binds: ["0", "0"]
            )
        ),
    ]

    @Test func everyDocumentedUseWorksAsItsRole() async throws {
        try await RevokerTestStack.with { harness in
            try Self.applyRoles(to: harness.database.url)
            try await Self.withLogins(harness) { logins in
                var files: [String: String] = [:]
                let first = try await harness.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "000123.abcdef")
                let second = try await harness.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "000124.abcdef")
                harness.secrets.add(first.value)
                harness.secrets.add(second.value)
                files["token-file"] = try Self.write(first.value, in: harness.files.directory)
                files["token-2"] = second.value
                files["witness"] = harness.files.directory.appendingPathComponent("kept-checkpoints.jsonl").path

                for (index, entry) in Self.documented.enumerated() {
                    let url = try #require(logins[entry.role])
                    let what = "\(entry.role.rawValue): \(entry.doc) (#\(index))"
                    switch entry.use {
                    case .command(let arguments, let saveAs):
                        let result = try await RevokerProcess.run(
                            Self.fill(arguments, files),
                            environment: Self.environment(for: entry.role, url: url, harness: harness)
                        )
                        #expect(result.status == 0, "\(what) exits \(result.status): \(result.stderr.suffix(800))")
                        try harness.expectNoSecrets(in: result.stdout + result.stderr)
                        if let saveAs { files[saveAs] = try Self.write(result.stdout, in: harness.files.directory) }
                    case .service(let arguments, let ready):
                        let process = try RevokerProcess(arguments, environment: Self.environment(for: entry.role, url: url, harness: harness))
                        do {
                            try await process.waitForOutput(ready, timeout: .seconds(120))
                        } catch {
                            Issue.record("\(what) never got to work: \(process.stderrSoFar.suffix(800))")
                        }
                        process.signal(SIGTERM)
                        let result = try await process.wait(timeout: .seconds(120))
                        #expect(result.status == 0, "\(what) exits \(result.status) on SIGTERM: \(result.stderr.suffix(800))")
                        try harness.expectNoSecrets(in: result.stdout + result.stderr)
                    case .sql(let sql, let binds):
                        do {
                            try await Self.run(sql, binds: Self.fill(binds, files), url: url)
                        } catch {
                            Issue.record("\(what) is refused: \(String(reflecting: error).prefix(800))")
                        }
                    }
                }
                let requests = try await harness.requests()
                #expect(requests.count == 2 && requests.allSatisfy { $0.outcome == .revoked }, "both enqueued requests were revoked")
            }
        }
    }

    /// What a `revoker` process of `role` is given: the service its whole configuration; others
    /// only the database, as compliance staff would hold nothing more than a login and the public key.
    static func environment(for role: Role, url: String, harness: RevokerTestStack) -> [String: String] {
        guard role == .worker else { return ["DATABASE_URL": url] }
        var environment = harness.environment
        environment["DATABASE_URL"] = url
        return environment
    }

    /// Runs `deploy/postgres/roles.sql` with psql, as docs/operations.md says, as the database's owner.
    static func applyRoles(to url: String) throws {
        let file = PrivatePostgres.packageRoot.appendingPathComponent("deploy/postgres/roles.sql").path
        let (status, output) = try ChildProcess.runBlocking(
            "/bin/sh",
            ["-c", #"psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f "$2" 2>&1"#, "sh", url, file],
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        )
        guard status == 0 else { throw RolesNotApplied(output: output) }
    }

    struct RolesNotApplied: Error, CustomStringConvertible {
        var output: String
        var description: String { "psql -f deploy/postgres/roles.sql failed: \(output.suffix(1000))" }
    }

    /// Creates a login in each role (random names and passwords; roles are the server's, not
    /// the database's), runs `body` with each one's URL, and drops them.
    static func withLogins(_ harness: RevokerTestStack, _ body: ([Role: String]) async throws -> Void) async throws {
        let suffix = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        var logins: [Role: String] = [:]
        var names: [String] = []
        for role in Role.allCases {
            let name = "\(role.rawValue)_login_\(suffix)"
            let password = UUID().uuidString.replacingOccurrences(of: "-", with: "")
            try await harness.database.client.query(
                PostgresQuery(unsafeSQL: "CREATE ROLE \(name) LOGIN PASSWORD '\(password)' IN ROLE \(role.rawValue)"),
                logger: harness.logger
            )
            names.append(name)
            var url = try #require(URLComponents(string: harness.database.url))
            url.user = name
            url.password = password
            logins[role] = try #require(url.string)
        }
        let result: Result<Void, any Error>
        do {
            result = .success(try await body(logins))
        } catch {
            result = .failure(error)
        }
        for name in names {
            _ = try? await harness.database.client.query(PostgresQuery(unsafeSQL: "DROP ROLE IF EXISTS \(name)"), logger: harness.logger)
        }
        try result.get()
    }

    /// Runs one statement on a connection of the login's own.
    static func run(_ sql: String, binds: [String], url: String) async throws {
        let configuration = try DatabaseEndpoint(url: url).connectionConfiguration()
        let logger = Logger(label: "revoker.role-tests", factory: { _ in SwiftLogNoOpLogHandler() })
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            var bindings = PostgresBindings()
            for value in binds { bindings.append(value) }
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger).collect()
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }

    static func fill(_ values: [String], _ files: [String: String]) -> [String] {
        values.map { value in files.reduce(value) { $0.replacingOccurrences(of: "{\($1.key)}", with: $1.value) } }
    }

    static func write(_ text: String, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("role-test-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        return path
    }
}
