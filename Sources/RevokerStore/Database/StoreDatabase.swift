import Logging
import PostgresNIO

/// Maps database errors to ``RevokerStoreError`` without leaking query binds or row data.
enum StoreDatabase {
    static func run<R>(
        _ logger: Logger,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> sending R
    ) async throws -> sending R {
        do {
            return try await body()
        } catch {
            throw self.map(error)
        }
    }

    static func map(_ error: any Error) -> any Error {
        switch error {
        case let error as RevokerStoreError:
            return error
        case let error as PostgresTransactionError:
            if let inner = error.closureError { return self.map(inner) }
            if let inner = error.beginError ?? error.commitError { return self.map(inner) }
            return RevokerStoreError(.database, "a database transaction failed")
        case let error as PSQLError:
            let state = error.serverInfo?[.sqlState]
            // The server message is safe: our own RAISE texts and PostgreSQL messages do not
            // carry row values (those are in `detail`, which is dropped on purpose).
            let message = error.serverInfo?[.message]
            let detail = "code: \(error.code), sqlstate: \(state ?? "-"), message: \(message ?? "-")"
            if state == "RV409" {
                return RevokerStoreError(
                    .conflict,
                    message ?? "a live revocation request for this external reference has a different credential",
                    detail: detail
                )
            }
            if state == "22023", let message {
                // Our own functions' refusals, which name the argument and the rule.
                return RevokerStoreError(.invalidArgument, message, detail: detail)
            }
            if state == "23514" || state == "22023" || state == "22001" {
                return RevokerStoreError(.invalidArgument, "the database rejected a value", detail: detail)
            }
            return RevokerStoreError(.database, "the database reported an error", detail: detail)
        case is PostgresDecodingError:
            return RevokerStoreError(.unexpectedData, "the database returned data of an unexpected type")
        case is CancellationError:
            return error
        default:
            return RevokerStoreError(.database, "the database operation failed", detail: String(describing: type(of: error)))
        }
    }
}

extension PostgresConnection {
    /// Runs a statement and consumes its result, so that errors raised while the server
    /// executes it (after the row description) are thrown here rather than dropped.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await self.query(query, logger: logger).collect()
    }
}
