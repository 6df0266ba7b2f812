import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

@Suite("Migrations")
struct MigrationTests {
    @Test func appliesTwiceWithoutChange() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            let migrator = Migrator(client: db.client, logger: Logger(label: "test"))
            #expect(try await migrator.isCurrent() == false)
            #expect(try await migrator.migrate() == Migration.all.map(\.version))
            #expect(try await migrator.migrate() == [])
            #expect(try await migrator.isCurrent())
            #expect(try await migrator.pendingMigrations().isEmpty)
        }
    }

    @Test func concurrentMigratorsApplyOnce() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            let first = db.makeClient()
            let second = db.makeClient()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await first.run() }
                group.addTask { await second.run() }
                async let a = Migrator(client: first, logger: Logger(label: "a")).migrate()
                async let b = Migrator(client: second, logger: Logger(label: "b")).migrate()
                let applied = try await a + b
                #expect(applied == Migration.all.map(\.version))
                group.cancelAll()
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.schema_migrations").collect()
            #expect(try rows.first?.decode(Int.self) == Migration.all.count)
        }
    }

    @Test func everyMigrationFileIsEmbedded() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.map { String($0.dropLast(4)) } == Migration.all.map(\.name))
        for (file, migration) in zip(files, Migration.all) {
            #expect(try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8) == migration.sql)
            #expect(Int(file.prefix(4)) == migration.version)
        }
    }

    /// docs/operations.md's `psql` line, run as printed: every file applied in its own
    /// transaction, and the schema it leaves is one `revoker migrate` takes as current.
    @Test func theDocumentedPsqlLineAppliesEveryMigration() async throws {
        let root = PrivatePostgres.packageRoot
        let command = try #require(
            try Documentation.read("docs/operations.md").components(separatedBy: "`").first {
                $0.contains("psql") && $0.contains("--single-transaction")
            },
            "docs/operations.md shows how to apply the migrations with psql"
        )
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            let environment = ProcessInfo.processInfo.environment.merging(["DATABASE_URL": db.url]) { $1 }
            let (status, output) = try ChildProcess.runBlocking("/bin/sh", ["-c", command], environment: environment, workingDirectory: root.path)
            #expect(status == 0, "\(output.suffix(2000))")
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.schema_migrations").collect()
            #expect(try rows.first?.decode(Int.self) == Migration.all.count)
            #expect(try await Migrator(client: db.client, logger: Logger(label: "t")).migrate() == [])
        }
    }

    /// `Sources/RevokerStore/Schema/schema.sql` is what the migrations make: a migration that
    /// changes the schema comes with the file `scripts/schema` rewrites.
    @Test func theSchemaFileIsWhatTheMigrationsMake() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            // The script makes a database of its own on this server, and drops it.
            let environment = ProcessInfo.processInfo.environment.merging(["DATABASE_URL": db.url]) { $1 }
            let (status, output) = try ChildProcess.runBlocking(
                PrivatePostgres.packageRoot.appendingPathComponent("scripts/schema").path,
                ["--check"],
                environment: environment,
                workingDirectory: PrivatePostgres.packageRoot.path
            )
            #expect(status == 0, "\(output.suffix(4000))")
        }
    }

    @Test func refusesChangedChecksum() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            try await Migrator(client: db.client, logger: Logger(label: "t")).migrate()
            try await db.client.query("UPDATE revoker.schema_migrations SET checksum = 'x'")
            await #expect(throws: RevokerStoreError.self) {
                try await Migrator(client: db.client, logger: Logger(label: "t")).migrate()
            }
            #expect(try await Migrator(client: db.client, logger: Logger(label: "t")).isCurrent() == false)
        }
    }
}
