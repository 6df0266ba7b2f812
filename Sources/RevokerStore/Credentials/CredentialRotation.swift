import Foundation
import Logging
import PostgresNIO

/// Re-seals what is stored under older sealing keys with the keyring's current key, online:
/// held grants' tokens and requests' credentials in any state, a bounded batch per transaction;
/// rows another transaction holds locked are passed over (``usage()`` shows them; run again once
/// they are free), and rows that cannot be opened are reported by id and left as they are.
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

    /// A stored row whose sealed value cannot be opened (bad bytes, a key id the keyring lacks, or
    /// an authentication failure): passed over, named by its id only.
    public struct Unreadable: Sendable, Hashable {
        public enum Table: String, Sendable, Hashable {
            /// A held grant's token (`revoker.grants`).
            case grant
            /// A request's credential (`revoker.revocation_requests`).
            case request
        }

        public var table: Table
        public var id: UUID
        /// Why it cannot be opened; never holds the sealed bytes or a secret.
        public var reason: String

        public init(table: Table, id: UUID, reason: String) {
            self.table = table
            self.id = id
            self.reason = reason
        }
    }

    /// What one batch did.
    public struct Batch: Sendable, Hashable {
        public var grants = 0
        public var requests = 0
        /// Rows under older keys that could not be opened; left as they were.
        public var unreadable: [Unreadable] = []
        /// Rows the batch found under older keys and could lock (re-sealed or unreadable).
        public var selected = 0
        /// When nothing could be locked: rows under older keys that another transaction (a
        /// worker's claim or finish) held locked, unreadable ones passed over not counted.
        public var locked = 0
        public var total: Int { grants + requests }

        public init() {}
    }

    /// What a whole run did and what it left.
    public struct Summary: Sendable, Hashable {
        public var grants = 0
        public var requests = 0
        public var unreadable: [Unreadable] = []
        /// Rows locked by another transaction when the run last looked.
        public var locked = 0
        /// What each key seals once the run ended.
        public var usage = Usage()

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

    /// Re-seals every row under an older key, a batch of `batchSize` per transaction, until
    /// nothing under an older key can be locked. Unreadable rows are passed over and reported;
    /// `progress` hears each batch.
    public func resealAll(batchSize: Int, progress: (Batch) -> Void = { _ in }) async throws -> Summary {
        var summary = Summary()
        // Ids already reported unreadable: never selected again in this run, so it ends.
        var skipGrants: [UUID] = []
        var skipRequests: [UUID] = []
        while true {
            let batch = try await resealBatch(limit: batchSize, skippingGrants: skipGrants, skippingRequests: skipRequests)
            summary.grants += batch.grants
            summary.requests += batch.requests
            summary.unreadable += batch.unreadable
            for row in batch.unreadable {
                switch row.table {
                case .grant: skipGrants.append(row.id)
                case .request: skipRequests.append(row.id)
                }
            }
            progress(batch)
            if batch.selected == 0 {
                summary.locked = batch.locked
                break
            }
        }
        summary.usage = try await usage()
        return summary
    }

    /// Re-seals up to `limit` held grants and `limit` requests (in any state: a failed one kept
    /// for `requeue` too) sealed under older keys; rows that cannot be opened are reported in
    /// ``Batch/unreadable`` and left as they are, and the ids in `skippingGrants` and
    /// `skippingRequests` are not looked at.
    public func resealBatch(limit: Int, skippingGrants: [UUID] = [], skippingRequests: [UUID] = []) async throws -> Batch {
        guard (1...10_000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "the batch size must be between 1 and 10000") }
        let current = sealer.keyring.currentKeyID
        return try await StoreDatabase.run(logger) {
            try await client.withTransaction(logger: logger) { connection in
                var batch = Batch()
                let grants = try await connection.query(
                    """
                    SELECT id, sealed_token, token_key_id, token_kind FROM revoker.grants
                    WHERE sealed_token IS NOT NULL AND token_key_id <> \(current) AND id <> ALL (\(skippingGrants)::uuid[])
                    ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                batch.selected += grants.count
                var resealed: [(UUID, ByteBuffer, ByteBuffer)] = []
                for row in grants {
                    let (id, bytes, keyID, rawKind) = try row.decode((UUID, ByteBuffer, String, String).self)
                    let old = SealedCredential(keyID: keyID, bytes: Array(bytes.readableBytesView))
                    let credential: Credential
                    do throws(RevokerStoreError) {
                        guard let kind = CredentialKind(rawValue: rawKind) else {
                            throw RevokerStoreError(.unexpectedData, "unknown token kind in the database")
                        }
                        credential = try sealer.open(old, grantID: id, kind: kind)
                    } catch {
                        batch.unreadable.append(unreadable(.grant, id, error))
                        continue
                    }
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
                // Every state: a failed request kept for `requeue`, and a running one (its worker
                // holds the opened credential, not the bytes; its writes are fenced, not compared).
                let requests = try await connection.query(
                    """
                    SELECT id, sealed_credential, credential_key_id, credential_kind FROM revoker.revocation_requests
                    WHERE sealed_credential IS NOT NULL AND credential_key_id <> \(current) AND id <> ALL (\(skippingRequests)::uuid[])
                    ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                batch.selected += requests.count
                resealed = []
                for row in requests {
                    let (id, bytes, keyID, rawKind) = try row.decode((UUID, ByteBuffer, String, String).self)
                    guard let kind = CredentialKind(rawValue: rawKind) else {
                        batch.unreadable.append(Unreadable(table: .request, id: id, reason: "unknown credential kind in the database"))
                        continue
                    }
                    let old = SealedCredential(keyID: keyID, bytes: Array(bytes.readableBytesView))
                    let credential: Credential
                    do throws(RevokerStoreError) {
                        credential = try sealer.open(old, requestID: id, kind: kind)
                    } catch {
                        batch.unreadable.append(unreadable(.request, id, error))
                        continue
                    }
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
                if batch.selected == 0 {
                    // Nothing lockable is left: what remains (unreadable rows aside) is locked by others.
                    let rows = try await connection.query(
                        """
                        SELECT (SELECT count(*) FROM revoker.grants
                                WHERE sealed_token IS NOT NULL AND token_key_id <> \(current) AND id <> ALL (\(skippingGrants)::uuid[]))
                             + (SELECT count(*) FROM revoker.revocation_requests
                                WHERE sealed_credential IS NOT NULL AND credential_key_id <> \(current)
                                  AND id <> ALL (\(skippingRequests)::uuid[]))
                        """,
                        logger: logger
                    ).collect()
                    batch.locked = Int(try rows.first?.decode(Int64.self) ?? 0)
                }
                return batch
            }
        }
    }

    /// The report of a row that cannot be opened; the caller says it (debug here, not twice).
    private func unreadable(_ table: Unreadable.Table, _ id: UUID, _ error: RevokerStoreError) -> Unreadable {
        logger.debug(
            "A sealed credential cannot be opened; left under its key",
            metadata: [table == .grant ? "revoker.grant.id" : "revoker.request.id": "\(id)", "revoker.error": "\(error.code)"]
        )
        return Unreadable(table: table, id: id, reason: error.message)
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
