import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Acknowledged writes a failover lost. A promotion (or a restore) starts a new timeline; after
/// one, each process looks for what it acknowledged (``acknowledged``) and records what is gone.
extension RevocationQueue {
    /// The primary's timeline (the first eight hex digits of its WAL file name); nil while the
    /// server is a standby, which has no current WAL position of its own.
    public func databaseTimeline(logger: Logger? = nil) async throws -> UInt32? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                """
                SELECT CASE WHEN pg_is_in_recovery() THEN NULL
                            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 END
                """,
                logger: logger
            ).collect()
            return try rows.first?.decode(Int64?.self).map { UInt32(truncatingIfNeeded: $0) }
        }
    }

    /// How far a request's end may be stamped after this process saw it commit: the database's
    /// clock against this machine's. An end redone after a failover is stamped later than that.
    static let endStampSlack: TimeInterval = 2

    /// Those of `writes` the database no longer holds. A request's end counts as held only when
    /// the request is final and was ended no later than the end acknowledged (plus
    /// ``endStampSlack``): one ended again after a failover lost its first end.
    public func missing(_ writes: [AcknowledgedWrite], logger: Logger? = nil) async throws -> [AcknowledgedWrite] {
        let logger = logger ?? self.logger
        var missing: [AcknowledgedWrite] = []
        for start in stride(from: 0, to: writes.count, by: 10_000) {
            let chunk = Array(writes[start..<min(start + 10_000, writes.count)])
            let kinds = chunk.map(\.kind.rawValue)
            let ids = chunk.map(\.id)
            let providers = chunk.map { $0.provider ?? "" }
            let times = chunk.map { $0.at.timeIntervalSince1970 + Self.endStampSlack }
            let absent: [Int] = try await StoreDatabase.run(logger) {
                try await client.query(
                    """
                    SELECT w.n::int FROM unnest(\(kinds)::text[], \(ids)::text[], \(providers)::text[], \(times)::float8[])
                        WITH ORDINALITY AS w(kind, id, provider, latest, n)
                    WHERE NOT CASE w.kind
                        WHEN 'request' THEN EXISTS (SELECT 1 FROM revoker.revocation_requests r WHERE r.id = w.id::uuid)
                        WHEN 'grant' THEN EXISTS (SELECT 1 FROM revoker.grants g WHERE g.id = w.id::uuid)
                        WHEN 'deletion' THEN EXISTS (SELECT 1 FROM revoker.account_deletions d WHERE d.id = w.id::uuid)
                        WHEN 'message' THEN EXISTS (
                            SELECT 1 FROM revoker.provider_messages m WHERE m.provider = w.provider AND m.message_id = w.id)
                        WHEN 'end' THEN EXISTS (
                            SELECT 1 FROM revoker.revocation_requests r
                            WHERE r.id = w.id::uuid AND r.state NOT IN ('pending', 'running') AND r.finished_at <= to_timestamp(w.latest))
                    END
                    ORDER BY w.n
                    """,
                    logger: logger
                ).collect().map { try $0.decode(Int.self) }
            }
            missing += absent.map { chunk[$0 - 1] }
        }
        return missing
    }

    /// Records `lost`: a `write_lost` row on each app's chain and a `database.write_lost` event
    /// for its backend, in one transaction.
    public func recordLost(_ lost: [AcknowledgedWrite], timelines: (from: UInt32, to: UInt32), actor: String, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        try Self.validateActor(actor)
        try await StoreDatabase.run(logger) {
            try await client.withTransaction(logger: logger) { connection in
                for write in lost {
                    let detail =
                        "\(write.kind.rawValue) \(write.provider.map { "\($0) " } ?? "")\(write.id) acknowledged at "
                        + "\(WireFormat.timestamp(write.at)), missing after the database's timeline went from \(timelines.from) to \(timelines.to)"
                    try await AuditWriter.write(
                        [AuditEvent(.writeLost, detail: String(detail.prefix(500)))],
                        clientID: write.clientID,
                        actor: actor,
                        on: connection,
                        logger: logger
                    )
                    // The event names the lost write in the fields its kind has elsewhere.
                    var (requestID, grantID, reference) = (UUID?.none, UUID?.none, write.reference)
                    var (notificationID, deletion) = (String?.none, String?.none)
                    switch write.kind {
                    case .request, .end: requestID = UUID(uuidString: write.id)
                    case .grant: grantID = UUID(uuidString: write.id)
                    case .message: notificationID = write.id
                    case .deletion:
                        deletion = WireFormat.jsonObject(
                            [("id", WireFormat.jsonString(write.id))] + (reference.map { [("account_reference", WireFormat.jsonString($0))] } ?? [])
                        )
                        reference = nil
                    }
                    try await connection.run(
                        """
                        INSERT INTO revoker.outbox_events
                            (type, client_id, request_id, grant_id, external_reference, error_code, notification_id, provider, deletion)
                        VALUES ('database.write_lost', \(write.clientID), \(requestID), \(grantID), \(reference),
                                \(write.kind.rawValue), \(notificationID), \(write.provider), \(deletion)::jsonb)
                        """,
                        logger: logger
                    )
                }
            }
        }
    }
}
