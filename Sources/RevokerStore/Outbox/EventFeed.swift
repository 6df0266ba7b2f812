import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// Reads the outbox in order. An event is handed out only once every transaction older than
/// the one that wrote it has ended (its transaction id is below the snapshot's xmin), so no
/// event can later appear behind a cursor a reader already passed.
public struct EventFeed: Sendable {
    /// The channel the outbox's insert trigger notifies.
    public static let wakeUpChannel = "revoker_events"

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Up to `limit` events after `cursor` (from the start when nil), oldest first; only the
    /// apps in `clientIDs` when given.
    public func events(after cursor: EventCursor?, clientIDs: [String]? = nil, limit: Int = 100, logger: Logger? = nil) async throws -> [OutboxEvent]
    {
        let logger = logger ?? self.logger
        guard (1...1000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000") }
        let transaction = cursor.map { String($0.transaction) }
        let position = cursor?.position
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                """
                SELECT e.txid::text, e.position, e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference,
                       e.apple_user_id, e.outcome, e.error_code, e.notification_id, e.event_time, e.provider, e.checkpoint::text,
                       e.grant_id, e.deletion::text AS deletion, e.erasure_code,
                       -- A deletion of every app that touched several was asked by none of them: its
                       -- trace goes to none, so that no app learns of another's part.
                       coalesce(
                           (SELECT r.trace_parent FROM revoker.revocation_requests r
                            WHERE r.id = e.request_id AND (r.deletion_id IS NULL OR revoker.deletion_trace_shared(r.deletion_id))),
                           (SELECT d.trace_parent FROM revoker.account_deletions d
                            WHERE d.id = (e.deletion->>'id')::uuid AND revoker.deletion_trace_shared(d.id))
                       ) AS trace_parent
                FROM revoker.outbox_events e
                WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot())
                  AND (\(transaction)::text IS NULL OR (e.txid, e.position) > (\(transaction)::text::xid8, \(position)::int8))
                  AND (\(clientIDs)::text[] IS NULL OR e.client_id = ANY(\(clientIDs)::text[]))
                ORDER BY e.txid, e.position
                LIMIT \(limit)
                """,
                logger: logger
            ).collect()
            return try rows.map(Self.decode)
        }
    }

    static func decode(_ row: PostgresRow) throws -> OutboxEvent {
        let (
            transaction, position, id, type, clientID, occurredAt, requestID, reference, userID, outcome, errorCode, notificationID, eventTime,
            provider, checkpoint
        ) =
            try row.decode(
                (String, Int64, UUID, String, String, Date, UUID?, String?, String?, String?, String?, String?, Date?, String?, String?).self
            )
        let cells = row.makeRandomAccess()
        let grantID = try cells["grant_id"].decode(UUID?.self)
        guard let txid = UInt64(transaction) else { throw RevokerStoreError(.unexpectedData, "an event's transaction id is not a number") }
        return OutboxEvent(
            id: id,
            type: type,
            clientID: clientID,
            occurredAt: occurredAt,
            cursor: EventCursor(transaction: txid, position: position),
            requestID: requestID,
            externalReference: reference,
            userID: userID,
            provider: provider,
            outcome: outcome,
            errorCode: errorCode,
            notificationID: notificationID,
            eventTime: eventTime,
            checkpoint: checkpoint,
            grantID: grantID,
            deletion: try cells["deletion"].decode(String?.self),
            erasureCode: try cells["erasure_code"].decode(String?.self),
            traceParent: try cells["trace_parent"].decode(String?.self).flatMap { TraceParent($0) }
        )
    }
}

extension EventFeed {
    /// Listens for new events for the duration of `body` (hints only: poll as well).
    public func withWakeUps<Result: Sendable>(_ body: @Sendable (WakeUps) async throws -> Result) async throws -> Result {
        try await client.withConnection { connection in
            try await connection.listen(on: Self.wakeUpChannel) { notifications in
                try await body(WakeUps(base: notifications))
            }
        }
    }

    /// Whether events after `cursor` (only `clientIDs`' when given) have committed, readable yet
    /// or still behind a transaction that is open.
    public func hasCommittedEvents(after cursor: EventCursor?, clientIDs: [String]? = nil, logger: Logger? = nil) async throws -> Bool {
        let logger = logger ?? self.logger
        let transaction = cursor.map { String($0.transaction) }
        let position = cursor?.position
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                """
                SELECT EXISTS (
                    SELECT 1 FROM revoker.outbox_events e
                    WHERE (\(transaction)::text IS NULL OR (e.txid, e.position) > (\(transaction)::text::xid8, \(position)::int8))
                      AND (\(clientIDs)::text[] IS NULL OR e.client_id = ANY(\(clientIDs)::text[]))
                )
                """,
                logger: logger
            ).collect()
            return try rows.first?.decode(Bool.self) ?? false
        }
    }

    /// Retention: deletes the events that occurred before `occurredBefore` and that every one of
    /// `endpoints` (the webhook endpoints configured now) has received. Returns how many.
    @discardableResult
    public func prune(occurredBefore: Date, keepingFor endpoints: [String], logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                "SELECT revoker.prune_events(\(occurredBefore), \(endpoints)::text[])::int",
                logger: logger
            ).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }
}
