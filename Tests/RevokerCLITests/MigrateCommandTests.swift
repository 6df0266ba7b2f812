import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import Testing

@testable import RevokerTesting

@Suite("revoker migrate")
struct MigrateCommandTests {
    @Test("two migrate processes started together apply each migration once, and a third finds nothing to do")
    func concurrentProcessesMigrateOnce() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { database in
            let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"]])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let environment = configuration.environment(databaseURL: database.url, baseURL: "http://127.0.0.1:9")

            async let first = RevokerProcess.run(["migrate"], environment: environment)
            async let second = RevokerProcess.run(["migrate"], environment: environment)
            let results = try await [first, second]
            for result in results { #expect(result.status == 0, "\(result.stderr)") }
            let outputs = results.map(\.stdout).sorted()
            let versions = Migration.all.map { String($0.version) }.joined(separator: ", ")
            #expect(outputs == ["Applied migrations: \(versions).\n", "The schema is up to date.\n"], "\(outputs)")

            let rows = try await database.client.query("SELECT count(*)::int FROM revoker.schema_migrations", logger: CLIFixture.logger).collect()
            #expect(try rows.first?.decode(Int.self) == Migration.all.count)
            let third = try await RevokerProcess.run(["migrate"], environment: environment)
            #expect(third.status == 0 && third.stdout == "The schema is up to date.\n", "\(third.stdout)\(third.stderr)")
        }
    }

    @Test("a database that refuses is reported with the server's reason at once, never with the password")
    func refusalsSayWhatTheServerSaid() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { database in
            let configuration = try LocalConfiguration(apps: [.apple: ["com.example.app"]])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let base = try #require(URLComponents(string: database.url))
            let password = "pw-\(UUID().uuidString)"
            func url(user: String? = nil, name: String? = nil, port: Int? = nil, requireTLS: Bool = false) throws -> String {
                var components = base
                components.user = user ?? base.user
                components.password = password
                if let name { components.path = "/" + name }
                if let port { components.port = port }
                if requireTLS { components.queryItems = [URLQueryItem(name: "sslmode", value: "require")] }
                return try #require(components.string)
            }
            let cases: [(String, String)] = [
                (try url(user: "nobody_\(UInt32.random(in: 0...UInt32.max))"), "role \"nobody_"),
                (try url(name: "missing_\(UInt32.random(in: 0...UInt32.max))"), "database \"missing_"),
                (try url(port: 9), "connection refused"),
                (try url(requireTLS: true), "does not offer TLS"),  // the test server has no TLS
            ]
            for (databaseURL, reason) in cases {
                let environment = configuration.environment(databaseURL: databaseURL, baseURL: "http://127.0.0.1:9")
                // Well under the ten seconds the pool would wait: the reason is known at once.
                let result = try await RevokerProcess.run(["migrate"], environment: environment, timeout: .seconds(8))
                #expect(result.status == 2, "\(result.stderr)")
                #expect(result.stderr.contains(reason), "\(result.stderr)")
                #expect(!result.stderr.contains(password) && !result.stdout.contains(password))
            }
        }
    }
}
