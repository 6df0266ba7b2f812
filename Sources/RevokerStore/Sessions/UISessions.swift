import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// A signed-in session of the compliance pages (migration 0008).
public struct UISession: Sendable, Hashable {
    /// The name of the API key that opened it.
    public var keyName: String
    /// The SHA-256 the configuration holds for that key.
    public var keySHA256: [UInt8]
    /// The token every form of the session carries.
    public var csrfToken: String
    /// When it ends, however active it is.
    public var expiresAt: Date

    /// Creates a session value.
    public init(keyName: String, keySHA256: [UInt8], csrfToken: String, expiresAt: Date) {
        self.keyName = keyName
        self.keySHA256 = keySHA256
        self.csrfToken = csrfToken
        self.expiresAt = expiresAt
    }
}

/// The sessions of the compliance pages, shared by every serving process. Only the SHA-256 of
/// a session's token is stored.
public struct UISessions: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Creates the store.
    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores a new session for `lifetime`, and removes every session that has ended. The
    /// audit trail records the sign-in (`note`, actor `actor`).
    public func open(tokenHash: [UInt8], session: UISession, lifetime: Duration, actor: String, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        let seconds = lifetime.timeInterval
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                try await connection.run("DELETE FROM revoker.ui_sessions WHERE expires_at <= now()", logger: logger)
                try await connection.run(
                    """
                    INSERT INTO revoker.ui_sessions (token_hash, key_name, key_sha256, csrf_token, expires_at)
                    VALUES (\(Data(tokenHash)), \(session.keyName), \(Data(session.keySHA256)), \(session.csrfToken),
                            now() + \(seconds)::float8 * interval '1 second')
                    """,
                    logger: logger
                )
                try await connection.run(Self.note(actor: actor, "signed in to the compliance pages"), logger: logger)
            }
        }
    }

    /// The live session with this token hash, marked as seen now; nil when there is none, it
    /// has ended, or it was idle for longer than `idle`.
    public func touch(tokenHash: [UInt8], idle: Duration, logger: Logger? = nil) async throws -> UISession? {
        let logger = logger ?? self.logger
        let seconds = idle.timeInterval
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                UPDATE revoker.ui_sessions SET last_seen_at = now()
                WHERE token_hash = \(Data(tokenHash)) AND expires_at > now()
                  AND last_seen_at > now() - \(seconds)::float8 * interval '1 second'
                RETURNING key_name, key_sha256, csrf_token, expires_at
                """,
                logger: logger
            ).collect()
        }
        guard let row = rows.first else { return nil }
        let (name, digest, csrf, expires) = try row.decode((String, Data, String, Date).self)
        return UISession(keyName: name, keySHA256: Array(digest), csrfToken: csrf, expiresAt: expires)
    }

    /// Ends the session with this token hash; nothing when there is none. With `actor`, a
    /// sign-out, which the audit trail records.
    public func close(tokenHash: [UInt8], actor: String? = nil, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let closed = try await connection.query(
                    "DELETE FROM revoker.ui_sessions WHERE token_hash = \(Data(tokenHash)) RETURNING 1",
                    logger: logger
                ).collect()
                if let actor, !closed.isEmpty {
                    try await connection.run(Self.note(actor: actor, "signed out of the compliance pages"), logger: logger)
                }
            }
        }
    }

    static func note(actor: String, _ detail: String) -> PostgresQuery {
        "INSERT INTO revoker.audit_events (event, actor, detail) VALUES ('note', \(actor), \(detail))"
    }
}
