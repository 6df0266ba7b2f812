import AppleSignIn
import AppleSignInSandbox
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import RevokerApp
import RevokerDemo
import RevokerStore
import RevokerWorker

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show the whole story locally: migrate, enqueue a realistic mix against the Apple sandbox, drain it, print the audit trail.",
        discussion: """
            Needs DATABASE_URL; `scripts/demo` starts a throw-away PostgreSQL and runs this. Two demo apps \
            get fresh keys, registered with an in-process Apple sandbox; nothing reaches Apple.
            """
    )

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .warning

    func run() async throws {
        guard let databaseURL = ProcessInfo.processInfo.environment["DATABASE_URL"], !databaseURL.isEmpty else {
            throw fail("The demo needs DATABASE_URL; `scripts/demo` starts a throw-away PostgreSQL and runs it.")
        }
        let logger = CommandLogging.logger(label: "revoker.demo", level: logLevel)
        let surprises = try await reportingStartupProblems {
            try await Demo(databaseURL: databaseURL, logger: logger) { print($0) }.run()
        }
        if surprises > 0 { throw Exit.someFailed }
    }
}
