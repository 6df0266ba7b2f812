import Foundation
import Logging
import PostgresNIO
import RevokerProvider

extension RevocationQueue {
    /// Pauses an app (its requests are not claimed) after a configuration fault; the worker
    /// probes again after `probeAfter`. Re-pausing updates the reason and probe time.
    public func pauseApp(clientID: String, reason: ErrorDetail, probeAfter: Duration, actor: String = "worker", logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try Self.validateActor(actor)
        let ms = max(0, probeAfter.milliseconds)
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                try await connection.run(
                    """
                    INSERT INTO revoker.app_pauses (client_id, reason_code, reason_description, next_probe_at)
                    VALUES (\(clientID), \(String(reason.code.prefix(100))), \(reason.description.map { String($0.prefix(500)) }),
                            now() + make_interval(secs => \(ms)::float8 / 1000.0))
                    ON CONFLICT (client_id) DO UPDATE
                    SET reason_code = EXCLUDED.reason_code, reason_description = EXCLUDED.reason_description,
                        next_probe_at = EXCLUDED.next_probe_at
                    """,
                    logger: logger
                )
                try await AuditWriter.write(
                    [AuditEvent(.appPaused, providerError: reason.code, detail: reason.description)],
                    clientID: clientID,
                    actor: actor,
                    on: connection,
                    logger: logger
                )
            }
        }
        logger.warning("Paused app after a configuration fault", metadata: ["revoker.client_id": "\(clientID)", "revoker.reason": "\(reason.code)"])
    }

    /// Resumes a paused app. Returns false if it was not paused.
    @discardableResult
    public func resumeApp(clientID: String, actor: String = "worker", logger: Logger? = nil) async throws -> Bool {
        let logger = logger ?? self.logger
        try Self.validateActor(actor)
        return try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    "DELETE FROM revoker.app_pauses WHERE client_id = \(clientID) RETURNING client_id",
                    logger: logger
                ).collect()
                guard !rows.isEmpty else { return false }
                try await AuditWriter.write([AuditEvent(.appResumed)], clientID: clientID, actor: actor, on: connection, logger: logger)
                return true
            }
        }
    }

    /// Currently paused apps.
    public func pausedApps(logger: Logger? = nil) async throws -> [AppPause] {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                "SELECT client_id, reason_code, reason_description, paused_at, next_probe_at FROM revoker.app_pauses ORDER BY client_id",
                logger: logger
            ).collect()
        }
        return try rows.map { row in
            let (clientID, code, description, pausedAt, nextProbeAt) = try row.decode((String, String, String?, Date, Date).self)
            return AppPause(
                clientID: clientID,
                reason: ErrorDetail(code: code, description: description),
                pausedAt: pausedAt,
                nextProbeAt: nextProbeAt
            )
        }
    }
}
