import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import Testing

@testable import RevokerTesting

@Suite("revoker migrate")
struct MigrateCommandTests {
    @Test("two migrate processes started together apply each migration once, and a third finds nothing to do")
    func concurrentProcessesMigrateOnce() async throws {
        try await ScratchDatabase.withScratchDatabase { database in
            let configuration = try LocalConfiguration(clientIDs: ["com.example.app"])
            defer { try? FileManager.default.removeItem(at: configuration.directory) }
            let environment = configuration.environment(databaseURL: database.url, appleBaseURL: "http://127.0.0.1:9")

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
}
