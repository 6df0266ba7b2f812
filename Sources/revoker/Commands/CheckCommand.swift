import AppleSignIn
import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerProvider
import RevokerStore
import RevokerWorker

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the configuration: load every app's key, sign a client secret per app and, with --online, try it at Apple.",
        discussion: """
            Loads every setting (configuration file and environment), loads each app's .p8 key, signs a client \
            secret for each app and prints the secret's decoded header and claims as JSON on standard output, \
            never the signature or the key. Problems are also summarised on standard error, one line each.

            With --online, each app's secret is sent to Apple's revoke endpoint (REVOKER_APPLE_BASE_URL) with a \
            random token that matches no user: Apple answers 200 when the client credentials are right and \
            invalid_client when the Team ID, Key ID, key or client_id do not match what Apple has. No grant is touched.

            When a database is configured (DATABASE_URL or "database_url"), also reports whether it is reachable \
            and whether its migrations are current.

            Example:
              revoker check --config /etc/revoker/revoker.json --online

            Exit codes: 0 all good, 1 an app or the database failed its check, 2 the configuration cannot be loaded.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Flag(name: .customLong("online"), help: "Also try each app's client secret at Apple's revoke endpoint with a random token.")
    var online = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: [.apps, .keyring])
        if !configuration.databaseURL.isEmpty {
            do {
                _ = try configuration.databaseConfiguration()
            } catch let error as ConfigurationError {
                throw fail(error.message)
            }
        }
        let logger = CommandLogging.logger(label: "revoker.check", level: options.logLevel)
        let report = try await ConfigurationCheck.run(configuration, online: online, logger: logger)
        FileHandle.standardOutput.write(report.json + Data("\n".utf8))

        let standardError = FileHandle.standardError
        for problem in report.problems {
            standardError.write(Data("revoker: check failed: \(problem)\n".utf8))
        }
        guard report.problems.isEmpty else { throw Exit.someFailed }
        let onlineNote = online ? ", accepted by Apple" : " (add --online to try them at Apple)"
        let databaseNote = configuration.databaseURL.isEmpty ? "" : "; the database is reachable and its migrations are current"
        let apps = report.appCount
        standardError.write(Data("revoker: check passed: \(apps) app\(apps == 1 ? "" : "s") signed\(onlineNote)\(databaseNote).\n".utf8))
    }
}
