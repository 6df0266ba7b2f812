import ArgumentParser
import RevokerConfiguration
import RevokerStore

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or update the revoker schema in PostgreSQL (idempotent; safe when several instances start at once)."
    )

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.migrate", level: options.logLevel)
        let applied = try await withDatabase(configuration, logger: logger) { client in
            do {
                let applied = try await Migrator(client: client, logger: logger).migrate()
                try await RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
                    .publishSQLIntake(clientIDs: configuration.apps.keys)
                return applied
            } catch let error as RevokerStoreError {
                throw fail("Migration failed: \(error.message)")
            }
        }
        print(applied.isEmpty ? "The schema is up to date." : "Applied migrations: \(applied.map(String.init).joined(separator: ", ")).")
    }
}
