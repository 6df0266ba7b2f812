import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Issues ``AuditReceipt``s: a request's whole chain, proven into signed checkpoints.
public struct AuditReceipts: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The receipt of request `id`, or nil when the trail has no row of it. Takes checkpoints
    /// until every row of the request is under one (at most `wait`).
    public func issue(requestID id: UUID, signer: AuditSigner, wait: Duration = .seconds(30), logger: Logger? = nil) async throws -> AuditReceipt? {
        let logger = logger ?? self.logger
        let chain = id.uuidString.lowercased()
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                "SELECT \(unescaped: AuditVerifier.rowColumns) FROM revoker.audit_events WHERE chain_key = \(chain) ORDER BY chain_seq",
                logger: logger
            ).collect()
        }
        guard !rows.isEmpty else { return nil }
        let chainRows = try rows.map(AuditVerifier.decodeRow)
        let checkpoints = AuditCheckpoints(client: client, logger: logger)
        let txids = chainRows.map(\.row.txid)
        var covering = try await checkpoints.covering(txids)
        let deadline = ContinuousClock.now + wait
        while chainRows.contains(where: { [index = AuditCheckpointSlices(covering)] in index.slice(of: $0.row.txid) == nil }) {
            guard ContinuousClock.now < deadline else {
                throw RevokerStoreError(
                    .conflict,
                    "the request's latest audit rows are not under a checkpoint yet (their transaction is still open); try again shortly"
                )
            }
            if try await checkpoints.take(signer: signer) == nil { try await Task.sleep(for: .milliseconds(200)) }
            covering = try await checkpoints.covering(txids)
        }
        // Each checkpoint's rows (id, hash) in id order, fetched and checked once.
        var slices: [Int: [(Int64, [UInt8])]] = [:]
        var events: [AuditReceipt.Event] = []
        let sliceIndex = AuditCheckpointSlices(covering)
        for (row, previous, hash) in chainRows {
            guard let index = sliceIndex.slice(of: row.txid) else {
                throw RevokerStoreError(.unexpectedData, "audit row \(row.id) lies in no checkpoint: run `revoker audit verify`")
            }
            let checkpoint = covering[index]
            if slices[index] == nil {
                let slice = try await sliceRows(checkpoint)
                guard slice.count == checkpoint.rowCount, MerkleTree.root(slice.map(\.1)) == checkpoint.merkleRoot else {
                    throw RevokerStoreError(
                        .unexpectedData,
                        "the audit trail no longer matches checkpoint \(checkpoint.seq): run `revoker audit verify`; no receipt is issued"
                    )
                }
                slices[index] = slice
            }
            let leaves = slices[index] ?? []
            guard let leaf = leaves.firstIndex(where: { $0.0 == row.id }) else {
                throw RevokerStoreError(.unexpectedData, "audit row \(row.id) is missing from checkpoint \(checkpoint.seq)")
            }
            events.append(
                AuditReceipt.Event(
                    row: row,
                    previousHash: previous.hex,
                    hash: hash.hex,
                    checkpoint: checkpoint.seq,
                    leafIndex: leaf,
                    path: MerkleTree.path(for: leaf, in: leaves.map(\.1)).map(\.hex)
                )
            )
        }
        let now = Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down))
        return try AuditReceipt.issue(
            events: events,
            checkpoints: slices.keys.sorted().map { covering[$0] },
            issuedAtMicros: now,
            key: signer.key
        )
    }

    /// The receipt of completed deletion `id`: its own chain's receipt and those of its requests
    /// and of its grants' holds; nil when there is no such deletion.
    public func issueAccount(
        deletionID id: UUID,
        signer: AuditSigner,
        wait: Duration = .seconds(30),
        logger: Logger? = nil
    ) async throws
        -> AccountReceipt?
    {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT d.state, r.id FROM revoker.account_deletions d
                LEFT JOIN LATERAL (
                    SELECT q.id FROM revoker.revocation_requests q WHERE q.deletion_id = d.id
                    UNION SELECT g.hold_request_id FROM revoker.grants g WHERE g.deletion_id = d.id AND g.hold_request_id IS NOT NULL
                ) r ON true
                WHERE d.id = \(id)
                """,
                logger: logger
            ).collect()
        }
        let found = try rows.map { row in try row.decode((String, UUID?).self) }
        guard let state = found.first?.0 else { return nil }
        guard state == "completed" else {
            throw RevokerStoreError(.conflict, "the deletion is still pending; its receipt is issued once it completed")
        }
        guard let deletion = try await issue(requestID: id, signer: signer, wait: wait, logger: logger) else {
            throw RevokerStoreError(.unexpectedData, "the deletion has no audit rows")
        }
        var requests: [AuditReceipt] = []
        for requestID in Set(found.compactMap(\.1)) {
            guard let receipt = try await issue(requestID: requestID, signer: signer, wait: wait, logger: logger) else {
                throw RevokerStoreError(.unexpectedData, "request \(requestID) has no audit rows")
            }
            requests.append(receipt)
        }
        let now = Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down))
        return try AccountReceipt.issue(deletion: deletion, requests: requests, issuedAtMicros: now, key: signer.key)
    }

    /// The newest deletion of account `reference`.
    public func deletion(reference: String, logger: Logger? = nil) async throws -> UUID? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                "SELECT id FROM revoker.account_deletions WHERE account_reference = \(reference) ORDER BY requested_at DESC, id LIMIT 1",
                logger: logger
            ).collect().first?.decode(UUID.self)
        }
    }

    /// The newest request with `reference` (of `clientID`, when given).
    public func request(reference: String, clientID: String?, logger: Logger? = nil) async throws -> UUID? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT request_id FROM revoker.audit_events
                WHERE external_reference = \(reference) AND request_id IS NOT NULL
                  AND (\(clientID)::text IS NULL OR client_id = \(clientID)::text)
                ORDER BY id DESC LIMIT 1
                """,
                logger: logger
            ).collect().first?.decode(UUID.self)
        }
    }

    private func sliceRows(_ checkpoint: AuditCheckpoint) async throws -> [(Int64, [UInt8])] {
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await AuditCheckpoints.allSliceRows(checkpoint, on: connection, logger: self.logger)
            }
        }
        guard let rows else {
            throw RevokerStoreError(
                .conflict,
                "the rows of checkpoint \(checkpoint.seq) are archived: issue the receipt from the archive file (`revoker audit receipt --archive FILE`)"
            )
        }
        return rows.map { ($0.id, $0.hash) }
    }
}
