import Logging
import PostgresNIO
import RevokerStore

/// What must hold before any part serves: the database answers, and (unless a command says
/// otherwise) its schema is current.
public struct StartupCheck: Sendable {
    let database: PostgresClient
    /// `host:port`, for messages; never the password.
    let place: String
    let requireCurrentSchema: Bool
    /// Run once the schema is current: registers the apps and intake keys of the SQL path.
    var publish: (@Sendable () async throws -> Void)? = nil
    let logger: Logger

    /// How long a person waits for an unreachable database (the pool alone retries for a minute).
    static let reachDeadline: Duration = .seconds(10)

    /// Throws ``RevokerAppError`` with `.databaseUnreachable` or `.schemaNotCurrent`.
    public func run() async throws {
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

    /// Throws ``RevokerAppError`` with `.databaseUnreachable` when the database does not answer in time.
    public func reach() async throws {
        var quiet = logger
        quiet.logLevel = .error
        do {
            try await withDeadline(Self.reachDeadline) { [database, quiet] in
                _ = try await database.query("SELECT 1", logger: quiet).collect()
            }
        } catch {
            throw RevokerAppError(.databaseUnreachable, "Cannot reach the database at \(place) (\(Self.describe(error))).")
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
        return String(describing: error).prefix(200).description
    }
}
