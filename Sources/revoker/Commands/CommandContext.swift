import AppleSignIn
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import RevokerApp
import RevokerProvider
import RevokerStore

/// Options every command that reads the configuration shares.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: ArgumentHelp("A JSON configuration file (default: $REVOKER_CONFIG).", valueName: "file"))
    var file: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .notice

    @Flag(help: "Refuse what is otherwise a warning, such as a key file that other users may read.")
    var strict = false
}

/// Exit codes shared by the commands (documented with each command in docs/).
enum Exit {
    /// Everything it finished succeeded.
    static let success = ExitCode(0)
    /// Some requests failed (drain), or the command's check failed.
    static let someFailed = ExitCode(1)
    /// The command could not run: configuration, database or input problem.
    static let couldNotRun = ExitCode(2)
    /// Drain stopped with requests still waiting (time ran out, or retries and paused apps remain).
    static let incomplete = ExitCode(3)
    /// `keys rotate`: stored rows under an older key cannot be opened (named by id).
    static let unreadable = ExitCode(4)
}

/// Prints a problem for people on standard error and ends the command with "could not run".
func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data("revoker: \(message)\n".utf8))
    return Exit.couldNotRun
}

/// Loads the configuration, turning every problem into one clear line and exit code 2.
func loadConfiguration(_ options: ConfigurationOptions, needs: RevokerConfiguration.Needs) throws -> RevokerConfiguration {
    do {
        let configuration = try RevokerConfiguration.load(
            file: options.file,
            environment: ProcessInfo.processInfo.environment,
            needs: needs,
            strict: options.strict
        )
        for warning in configuration.warnings {
            FileHandle.standardError.write(Data("revoker: warning: \(warning)\n".utf8))
        }
        return configuration
    } catch let error as ConfigurationError {
        throw fail(error.message)
    }
}

/// Runs `body` with the assembled program's database client, once it answers; a database that
/// cannot be reached (or, with `requireCurrentSchema`, is not migrated) is one clear line and
/// exit code 2, never a stack trace.
func withDatabase<T: Sendable>(
    _ configuration: RevokerConfiguration,
    requireCurrentSchema: Bool = false,
    logger: Logger,
    _ body: @Sendable (PostgresClient) async throws -> T
) async throws -> T {
    try await reportingStartupProblems {
        let app = try await RevokerApp(configuration: configuration, requireCurrentSchema: requireCurrentSchema, logger: logger)
        return try await app.withRunning { running in try await body(running.database) }
    }
}

/// Runs `body`, turning a ``RevokerAppError`` (configuration, database, schema) into one line
/// on standard error and exit code 2.
func reportingStartupProblems<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as RevokerAppError {
        throw fail(error.message)
    }
}
