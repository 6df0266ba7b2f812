import Logging
import PostgresNIO
import RevokerProvider
import RevokerStore

/// What must hold before any part serves: the database answers, and (unless a command says
/// otherwise) its schema is current.
public struct StartupCheck: Sendable {
    let database: PostgresClient
    /// `host:port`, for messages; never the password.
    let place: String
    let requireCurrentSchema: Bool
    /// Where a probe connection goes first, to report what the server says.
    var endpoint: DatabaseEndpoint? = nil
    /// Run once the schema is current: registers the apps and intake keys of the SQL path.
    var publish: (@Sendable () async throws -> Void)? = nil
    let logger: Logger
    /// The API, the worker and `withRunning` all wait for the check; it runs once for them all.
    let outcome = SharedOutcome()

    /// How long a person waits for an unreachable database (the pool alone retries for a minute).
    static let reachDeadline: Duration = .seconds(10)

    /// Throws ``RevokerAppError`` with `.databaseUnreachable` or `.schemaNotCurrent`. Every
    /// caller shares the first caller's run and its result.
    public func run() async throws {
        try await outcome.run { try await self.check() }
    }

    func check() async throws {
        try await reach()
        if requireCurrentSchema, try await !schemaIsCurrent() {
            throw RevokerAppError(.schemaNotCurrent, "The database schema is not current; run `revoker migrate` first.")
        }
        if let publish {
            do {
                try await publish()
            } catch {
                throw RevokerAppError(.database, "Cannot register the apps and intake keys of the SQL path (\(Self.describe(error))).")
            }
        }
    }

    /// Throws ``RevokerAppError`` with `.databaseUnreachable` when the database does not answer in
    /// time, or at once with what the server said when it refuses the connection.
    public func reach() async throws {
        var quiet = logger
        quiet.logLevel = .error
        if let endpoint { try await probe(endpoint, logger: quiet) }
        do {
            try await withDeadline(Self.reachDeadline) { [database, quiet] in
                _ = try await database.query("SELECT 1", logger: quiet).collect()
            }
        } catch {
            throw RevokerAppError(.databaseUnreachable, "Cannot reach the database at \(place) (\(Self.describe(error))).")
        }
    }

    /// One connection, outside the pool: a refused login or a missing database fails here with
    /// the server's own words, where the pool would retry quietly until the deadline.
    func probe(_ endpoint: DatabaseEndpoint, logger: Logger) async throws {
        do {
            let configuration = try endpoint.connectionConfiguration()
            let connection = try await withDeadline(Self.reachDeadline) {
                try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            }
            try? await connection.close()
        } catch {
            throw RevokerAppError(.databaseUnreachable, "Cannot use the database at \(place): \(Self.refusal(error, endpoint)).")
        }
    }

    /// What went wrong while connecting, in words that name the cause and never the password.
    static func refusal(_ error: any Error, _ endpoint: DatabaseEndpoint) -> String {
        guard let error = error as? PSQLError else {
            return error is DeadlineExceeded ? "no answer within \(reachDeadline)" : describe(error)
        }
        switch error.code {
        case .server:
            // The server's words name the role, the database or the missing TLS; they hold no password.
            let message = error.serverInfo?[.message].map { String($0.prefix(200)) } ?? "unknown"
            let hint = message.contains("no encryption") ? " (the server requires TLS: set sslmode=require in the URL)" : ""
            return "the server said: \(message)\(hint)"
        case .sslUnsupported:
            return "the server does not offer TLS, which sslmode in the URL requires"
        case .connectionError:
            let cause = error.underlying.map { String(describing: $0) } ?? ""
            if cause.contains("refused") { return "connection refused (is PostgreSQL listening on \(endpoint.host):\(endpoint.port)?)" }
            if cause.lowercased().contains("resolve") || cause.contains("NXDOMAIN") || cause.contains("lookup") {
                return "the host name \(endpoint.host) does not resolve"
            }
            return "the connection failed (\(cause.prefix(200)))"
        default:
            return describe(error)
        }
    }

    /// Whether every migration this build knows is applied.
    public func schemaIsCurrent() async throws -> Bool {
        do {
            return try await Migrator(client: database, logger: logger).isCurrent()
        } catch {
            throw RevokerAppError(.database, "Cannot read the schema version (\(Self.describe(error))).")
        }
    }

    /// A database failure without SQL or values (PSQLError's description hides them).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection: return "connection failed"
            case .server: return "the server refused: \(error.serverInfo?[.message].map { String($0.prefix(200)) } ?? "unknown")"
            default: return "\(error.code)"
            }
        }
        return SafeText.describing(error)
    }
}

/// The result of one run of a piece of work, shared by everyone who asks for it, including
/// those who ask while it is still running.
actor SharedOutcome {
    private var result: Result<Void, any Error>?
    private var waiting: [CheckedContinuation<Void, any Error>]?

    func run(_ body: @Sendable () async throws -> Void) async throws {
        if let result { return try result.get() }
        if waiting != nil {
            return try await withCheckedThrowingContinuation { waiting?.append($0) }
        }
        waiting = []
        let outcome: Result<Void, any Error>
        do {
            try await body()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        result = outcome
        for continuation in waiting ?? [] { continuation.resume(with: outcome) }
        waiting = nil
        try outcome.get()
    }
}
