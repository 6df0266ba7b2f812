import AppleSignIn
import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import PostgresNIO
import RevokerStore
import RevokerWorker

/// Options every command that reads the configuration shares.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: ArgumentHelp("A JSON configuration file (default: $REVOKER_CONFIG).", valueName: "file"))
    var file: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .notice
}

/// Exit codes shared by the commands (documented in the README).
enum Exit {
    /// Everything it finished succeeded.
    static let success = ExitCode(0)
    /// Some requests failed (drain), or the command's check failed.
    static let someFailed = ExitCode(1)
    /// The command could not run: configuration, database or input problem.
    static let couldNotRun = ExitCode(2)
    /// Drain stopped with requests still waiting (time ran out, or retries and paused apps remain).
    static let incomplete = ExitCode(3)
}

/// Prints a problem for people on standard error and ends the command with "could not run".
func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data("revoker: \(message)\n".utf8))
    return Exit.couldNotRun
}

/// Loads the configuration, turning every problem into one clear line and exit code 2.
func loadConfiguration(_ options: ConfigurationOptions, needs: RevokerConfiguration.Needs) throws -> RevokerConfiguration {
    do {
        return try RevokerConfiguration.load(file: options.file, environment: ProcessInfo.processInfo.environment, needs: needs)
    } catch let error as ConfigurationError {
        throw fail(error.message)
    }
}

/// Runs `body` with a connected PostgreSQL client; a database that cannot be reached is one
/// clear line and exit code 2, never a stack trace.
func withDatabase<T: Sendable>(
    _ configuration: RevokerConfiguration, logger: Logger, _ body: @Sendable (PostgresClient) async throws -> T
) async throws -> T {
    let settings: PostgresClient.Configuration
    do {
        settings = try configuration.databaseConfiguration()
    } catch let error as ConfigurationError {
        throw fail(error.message)
    }
    let client = PostgresClient(configuration: settings, backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        do {
            // The pool keeps retrying an unreachable server for a minute; a person waits ten seconds.
            var quiet = logger
            quiet.logLevel = .error
            try await withDeadline(.seconds(10)) { [quiet] in _ = try await client.query("SELECT 1", logger: quiet).collect() }
        } catch {
            throw fail("Cannot reach the database at \(settings.host ?? "?"):\(settings.port ?? 0) (\(DatabaseProblem.describe(error))).")
        }
        return try await body(client)
    }
}

/// Runs `body` with an HTTP client configured for Apple, shut down afterwards.
func withAppleClient<T>(_ configuration: RevokerConfiguration, logger: Logger, _ body: (AppleClient) async throws -> T) async throws -> T {
    let httpClient = AppleClient.makeHTTPClient(concurrency: configuration.worker.concurrency)
    let client = AppleClient(
        httpClient: httpClient,
        configuration: .init(baseURL: configuration.appleBaseURL, timeout: configuration.worker.appleTimeout),
        logger: logger
    )
    do {
        let result = try await body(client)
        try await httpClient.shutdown()
        return result
    } catch {
        try? await httpClient.shutdown()
        throw error
    }
}

/// Describes a database failure without SQL or values (PSQLError's description hides them).
enum DatabaseProblem {
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection: return "connection failed"
            case .server: return "the server refused: \(error.serverInfo?[.message].map { String($0.prefix(200)) } ?? "unknown")"
            default: return "\(error.code)"
            }
        }
        return String(describing: error).prefix(200).description
    }
}
