import ArgumentParser
import RevokerApp
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
        let applied = try await reportingStartupProblems {
            try await RevokerApp(configuration: configuration, requireCurrentSchema: false, logger: logger).withRunning { running in
                do {
                    return try await running.app.migrate()
                } catch let error as RevokerStoreError {
                    throw fail("Migration failed: \(error.message)")
                }
            }
        }
        print(applied.isEmpty ? "The schema is up to date." : "Applied migrations: \(applied.map(String.init).joined(separator: ", ")).")
    }
}
