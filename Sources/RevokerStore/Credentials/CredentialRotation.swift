import Foundation
import Logging
import PostgresNIO

/// Re-seals what is stored under older sealing keys with the keyring's current key, online:
/// held grants' tokens and waiting requests' credentials, a bounded batch per transaction, rows
/// a worker holds passed over (``usage()`` shows them; run again once they are free).
///
/// Each row is locked (`FOR UPDATE SKIP LOCKED`, as the claim locks) and replaced only if it
/// still holds the sealed bytes that were opened, so a worker's concurrent write is never lost.
public struct CredentialRotation: Sendable {
    let client: PostgresClient
    let sealer: CredentialSealer
    let logger: Logger

    public init(client: PostgresClient, sealer: CredentialSealer, logger: Logger) {
        self.client = client
        self.sealer = sealer
        self.logger = logger
    }

    /// How many stored rows each sealing key seals.
    public struct Usage: Sendable, Hashable {
        /// Held grants' tokens, by key id.
        public var grants: [String: Int] = [:]
        /// Requests' credentials, by key id.
        public var requests: [String: Int] = [:]

        public init() {}

        /// Every key id that seals a row.
        public var keyIDs: [String] { Set(grants.keys).union(requests.keys).sorted() }

        /// Rows sealed under keys other than `keyID`.
        public func rows(notUnder keyID: String) -> Int {
            grants.merging(requests, uniquingKeysWith: +).filter { $0.key != keyID }.values.reduce(0, +)
        }
    }

    /// What one batch re-sealed.
    public struct Batch: Sendable, Hashable {
        public var grants = 0
        public var requests = 0
        public var total: Int { grants + requests }

        public init() {}
    }

    /// The rows each key seals.
    public func usage() async throws -> Usage {
        try await StoreDatabase.run(logger) {
            var usage = Usage()
            let rows = try await client.query(
                """
                SELECT 'grant', token_key_id, count(*)::int FROM revoker.grants WHERE sealed_token IS NOT NULL GROUP BY token_key_id
                UNION ALL
                SELECT 'request', credential_key_id, count(*)::int FROM revoker.revocation_requests
                WHERE sealed_credential IS NOT NULL GROUP BY credential_key_id
                """,
                logger: logger
            ).collect()
            for row in rows {
                let (table, keyID, count) = try row.decode((String, String, Int).self)
                if table == "grant" { usage.grants[keyID] = count } else { usage.requests[keyID] = count }
            }
            return usage
        }
    }

    /// Re-seals up to `limit` grants and `limit` waiting requests sealed under older keys.
    public func resealBatch(limit: Int) async throws -> Batch {
        guard (1...10_000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "the batch size must be between 1 and 10000") }
        let current = sealer.keyring.currentKeyID
        return try await StoreDatabase.run(logger) {
            try await client.withTransaction(logger: logger) { connection in
                var batch = Batch()
                let grants = try await connection.query(
                    """
                    SELECT id, sealed_token, token_key_id FROM revoker.grants
                    WHERE sealed_token IS NOT NULL AND token_key_id <> \(current)
                    ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                var resealed: [(UUID, ByteBuffer, ByteBuffer)] = []
                for row in grants {
                    let (id, bytes, keyID) = try row.decode((UUID, ByteBuffer, String).self)
                    let old = SealedCredential(keyID: keyID, bytes: Array(bytes.readableBytesView))
                    let credential = try sealer.open(old, grantID: id, kind: .refreshToken)
                    resealed.append((id, bytes, ByteBuffer(bytes: try sealer.seal(credential, grantID: id).bytes)))
                }
                if !resealed.isEmpty {
                    batch.grants = try await Self.replace(
                        "grants",
                        column: "sealed_token",
                        keyColumn: "token_key_id",
                        resealed,
                        keyID: current,
                        on: connection,
                        logger: logger
                    )
                }
                // Only waiting requests: a running one is its worker's until it ends.
                let requests = try await connection.query(
                    """
                    SELECT id, sealed_credential, credential_key_id, credential_kind FROM revoker.revocation_requests
                    WHERE sealed_credential IS NOT NULL AND credential_key_id <> \(current) AND state = 'pending'
                    ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                resealed = []
                for row in requests {
                    let (id, bytes, keyID, rawKind) = try row.decode((UUID, ByteBuffer, String, String).self)
                    guard let kind = CredentialKind(rawValue: rawKind) else {
                        throw RevokerStoreError(.unexpectedData, "unknown credential kind in the database")
                    }
                    let old = SealedCredential(keyID: keyID, bytes: Array(bytes.readableBytesView))
                    let credential = try sealer.open(old, requestID: id, kind: kind)
                    resealed.append((id, bytes, ByteBuffer(bytes: try sealer.seal(credential, requestID: id).bytes)))
                }
                if !resealed.isEmpty {
                    batch.requests = try await Self.replace(
                        "revocation_requests",
                        column: "sealed_credential",
                        keyColumn: "credential_key_id",
                        resealed,
                        keyID: current,
                        on: connection,
                        logger: logger
                    )
                }
                return batch
            }
        }
    }

    /// Replaces each row's sealed bytes if they are still the ones opened; returns how many.
    private static func replace(
        _ table: String,
        column: String,
        keyColumn: String,
        _ rows: [(id: UUID, old: ByteBuffer, new: ByteBuffer)],
        keyID: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> Int {
        let updated = try await connection.query(
            """
            UPDATE revoker.\(unescaped: table) t SET \(unescaped: column) = n.new, \(unescaped: keyColumn) = \(keyID)
            FROM unnest(\(rows.map(\.id))::uuid[], \(rows.map(\.old))::bytea[], \(rows.map(\.new))::bytea[]) AS n(id, old, new)
            WHERE t.id = n.id AND t.\(unescaped: column) = n.old
            RETURNING t.id
            """,
            logger: logger
        ).collect()
        return updated.count
    }
}
