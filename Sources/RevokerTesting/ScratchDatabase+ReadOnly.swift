import Logging
import PostgresNIO
import RevokerLocalStack

extension ScratchDatabase {
    /// Makes the sessions that start from now on read-only, as on a standby being promoted, or
    /// writable again; with `endingOpenSessions`, ends every other session of the database so
    /// that its clients reconnect into the new setting.
    public func startSessions(readOnly: Bool, endingOpenSessions: Bool = false) async throws {
        let logger = Logger(label: "revoker.test")
        let setting = readOnly ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only"
        try await client.withConnection { connection in
            // This session may itself have started read-only.
            _ = try await connection.query("SET default_transaction_read_only = off", logger: logger).collect()
            _ = try await connection.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(name)\" \(setting)"), logger: logger).collect()
            if endingOpenSessions {
                _ = try await connection.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                    logger: logger
                ).collect()
            }
        }
    }
}
