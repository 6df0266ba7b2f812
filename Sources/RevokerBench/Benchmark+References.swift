import AppleSignIn
import AppleSignInSandbox
import Foundation
import PostgresNIO
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider

extension Benchmark {
    /// pgbench on the same server: one single-row `INSERT` per transaction, with each of
    /// `pgbenchClients` clients, `referenceTransactions` each.
    func measurePostgres() async throws -> BenchmarkReport.References {
        var references = BenchmarkReport.References()
        guard let pgbench = Self.pgbench() else {
            references.notes.append("pgbench not found under /usr/lib/postgresql/*/bin: install Debian's postgresql package")
            return references
        }
        try await ScratchDatabase.withScratchDatabase(on: options.databaseURL) { database in
            _ = try await database.client.query("CREATE TABLE commits (id bigserial PRIMARY KEY, value int NOT NULL)", logger: logger).collect()
            let script = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-bench-\(UUID().uuidString).sql")
            try Data("INSERT INTO commits (value) VALUES (1);\n".utf8).write(to: script)
            defer { try? FileManager.default.removeItem(at: script) }
            for clients in options.pgbenchClients {
                // A transaction count, not -T: pgbench times -T with SIGALRM, which a child of this process may have blocked.
                let arguments = [
                    "-n", "-f", script.path, "-c", "\(clients)", "-j", "\(min(clients, ProcessInfo.processInfo.activeProcessorCount))",
                    "-t", "\(max(1, options.referenceTransactions / clients))", database.url,
                ]
                let result = try await RevokerProcess.Handle.run(executable: pgbench, arguments: arguments)
                guard let line = result.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
                    let tps = Double(line.dropFirst(6).prefix { $0.isNumber || $0 == "." })
                else {
                    references.notes.append("pgbench with \(clients) client(s) printed no rate")
                    continue
                }
                references.pgbenchCommitsPerSecond["\(clients)"] = tps
            }
        }
        return references
    }

    /// The newest pgbench of Debian's PostgreSQL packages.
    static func pgbench() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        return versions.map { "\(root)/\($0)/bin/pgbench" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Validate + revoke pairs straight against the sandbox, no database: the rate at which this
    /// machine can sign secrets and answer as Apple, and what that costs in CPU.
    func measureSandboxAlone() async throws -> BenchmarkReport.SandboxAlone {
        let pairs = options.requests
        let width = options.concurrency(atLatency: 0)
        return try await RunningSandbox.with(transport: options.transport) { sandbox in
            try await sandbox.withClient { client in
                let app = try await sandbox.appClient(client, clientID: Self.apps[0])
                let tokens = try await concurrently(pairs, width: 16) { index in
                    try await sandbox.admin.mintRefreshToken(clientID: Self.apps[0], subject: "alone-\(index)").value
                }
                let cpu = ProcessStatistics.ownCPUSeconds()
                let started = ContinuousClock.now
                _ = try await concurrently(pairs, width: width) { index in
                    _ = try await app.validate(refreshToken: tokens[index])
                    try await app.revoke(token: tokens[index], hint: .refreshToken)
                }
                let elapsed = (ContinuousClock.now - started).timeInterval
                return .init(
                    pairs: pairs,
                    concurrency: width,
                    pairsPerSecond: Double(pairs) / elapsed,
                    cpuSecondsPer1000: (ProcessStatistics.ownCPUSeconds() - cpu) / Double(pairs) * 1000
                )
            }
        }
    }
}

extension RevokerProcess.Handle {
    /// Runs a program to its end and returns what it printed on standard output.
    static func run(executable: String, arguments: [String]) async throws -> String {
        let handle = try RevokerProcess.Handle(executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment)
        while handle.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        guard handle.terminationStatus == 0 else {
            throw BenchmarkFailure("\(URL(fileURLWithPath: executable).lastPathComponent) failed: \(handle.errors.suffix(500))")
        }
        return handle.output
    }
}
