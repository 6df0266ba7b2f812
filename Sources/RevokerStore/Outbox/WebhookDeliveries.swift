import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerProvider

/// Where each webhook endpoint stands in the event feed, and who may deliver to it now.
///
/// A deliverer holds an endpoint's lease (with a fencing token, as for requests) while it sends;
/// every change it makes applies only while that lease is current, so a deliverer that lost its
/// lease (it stalled, another took over) moves nothing.
public struct WebhookDeliveries: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Adds the endpoints not known yet. A new endpoint starts after the newest event readers
    /// can see now, or from the first event when `fromStart`.
    public func register(_ endpoints: [String], fromStart: Bool, logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        guard !endpoints.isEmpty else { return }
        _ = try await StoreDatabase.run(logger) {
            try await client.query(
                """
                WITH newest AS (
                    SELECT e.txid, e.position FROM revoker.outbox_events e
                    WHERE NOT \(fromStart) AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
                    ORDER BY e.txid DESC, e.position DESC LIMIT 1
                )
                INSERT INTO revoker.webhook_deliveries (endpoint, cursor_txid, cursor_position)
                SELECT name, (SELECT txid FROM newest), (SELECT position FROM newest)
                FROM unnest(\(endpoints)::text[]) AS name
                ON CONFLICT (endpoint) DO NOTHING
                """,
                logger: logger
            ).collect()
        }
    }

    /// Takes the endpoint's lease when nobody holds a current one and its next attempt is due.
    public func lease(_ endpoint: String, owner: String, duration: Duration, logger: Logger? = nil) async throws -> DeliveryLease? {
        let logger = logger ?? self.logger
        let ms = duration.milliseconds
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                """
                UPDATE revoker.webhook_deliveries
                SET lease_owner = \(owner), lease_expires_at = now() + make_interval(secs => \(ms)::float8 / 1000.0),
                    fencing_token = fencing_token + 1, updated_at = now()
                WHERE endpoint = \(endpoint) AND next_attempt_at <= now()
                  AND (lease_owner IS NULL OR lease_expires_at < now())
                RETURNING fencing_token, cursor_txid::text, cursor_position, attempts, failing_since
                """,
                logger: logger
            ).collect()
            guard let row = rows.first else { return nil }
            let (token, txid, position, attempts, failingSince) = try row.decode((Int64, String?, Int64?, Int, Date?).self)
            return DeliveryLease(
                endpoint: endpoint,
                owner: owner,
                fencingToken: token,
                cursor: Self.cursor(txid, position),
                attempts: attempts,
                failingSince: failingSince
            )
        }
    }

    /// The endpoint took the event at `cursor` (2xx): the cursor moves there, failures are
    /// forgotten, and the lease runs `extend` longer. False when the lease is no longer current.
    public func delivered(
        _ lease: DeliveryLease,
        through cursor: EventCursor,
        status: Int,
        extend: Duration
    ) async throws -> Bool {
        let (txid, ms) = (String(cursor.transaction), extend.milliseconds)
        return try await applied(
            """
            UPDATE revoker.webhook_deliveries
            SET cursor_txid = \(txid)::text::xid8, cursor_position = \(cursor.position), delivered = delivered + 1,
                attempts = 0, failing_since = NULL, parked_since = NULL, last_attempt_at = now(), last_status = \(status),
                last_error = NULL, lease_expires_at = now() + make_interval(secs => \(ms)::float8 / 1000.0), updated_at = now()
            WHERE endpoint = \(lease.endpoint) AND fencing_token = \(lease.fencingToken) AND lease_owner = \(lease.owner)
            RETURNING endpoint
            """
        )
    }

    /// The endpoint refused or could not be reached: the next attempt waits `delay`, and the
    /// endpoint is parked once it has failed for `parkAfter`. Releases the lease.
    public func failed(
        _ lease: DeliveryLease,
        status: Int?,
        error: String,
        delay: Duration,
        parkAfter: Duration
    ) async throws -> Bool {
        let (delayMs, parkMs) = (delay.milliseconds, parkAfter.milliseconds)
        let error = String(error.prefix(300))
        return try await applied(
            """
            UPDATE revoker.webhook_deliveries
            SET attempts = attempts + 1, last_attempt_at = now(), last_status = \(status), last_error = \(error),
                next_attempt_at = now() + make_interval(secs => \(delayMs)::float8 / 1000.0),
                failing_since = coalesce(failing_since, now()),
                parked_since = coalesce(parked_since,
                    CASE WHEN coalesce(failing_since, now()) <= now() - make_interval(secs => \(parkMs)::float8 / 1000.0) THEN now() END),
                lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
            WHERE endpoint = \(lease.endpoint) AND fencing_token = \(lease.fencingToken) AND lease_owner = \(lease.owner)
            RETURNING endpoint
            """
        )
    }

    /// Gives the lease back (nothing left to send, or shutting down).
    @discardableResult
    public func release(_ lease: DeliveryLease) async throws -> Bool {
        try await applied(
            """
            UPDATE revoker.webhook_deliveries SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
            WHERE endpoint = \(lease.endpoint) AND fencing_token = \(lease.fencingToken) AND lease_owner = \(lease.owner)
            RETURNING endpoint
            """
        )
    }

    /// Runs a fenced update; true when it found the lease current.
    private func applied(_ query: PostgresQuery) async throws -> Bool {
        try await StoreDatabase.run(logger) {
            try await !client.query(query, logger: logger).collect().isEmpty
        }
    }

    /// Every endpoint's state, by name.
    public func states(logger: Logger? = nil) async throws -> [DeliveryState] {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                """
                SELECT endpoint, cursor_txid::text, cursor_position, delivered, attempts, next_attempt_at, failing_since,
                       parked_since, last_attempt_at, last_status, last_error, lease_owner
                FROM revoker.webhook_deliveries ORDER BY endpoint
                """,
                logger: logger
            ).collect()
            return try rows.map { row in
                let (
                    endpoint, txid, position, delivered, attempts, nextAttemptAt, failingSince, parkedSince, lastAttemptAt, lastStatus, lastError,
                    leaseOwner
                ) =
                    try row.decode((String, String?, Int64?, Int64, Int, Date, Date?, Date?, Date?, Int?, String?, String?).self)
                return DeliveryState(
                    endpoint: endpoint,
                    cursor: Self.cursor(txid, position),
                    delivered: delivered,
                    attempts: attempts,
                    nextAttemptAt: nextAttemptAt,
                    failingSince: failingSince,
                    parkedSince: parkedSince,
                    lastAttemptAt: lastAttemptAt,
                    lastStatus: lastStatus,
                    lastError: lastError,
                    delivering: leaseOwner != nil
                )
            }
        }
    }

    /// How far behind each endpoint is: the age in seconds of the next event it has not
    /// received (the first after its cursor among its apps' events), 0 when it has them all.
    /// `endpoints` maps each configured endpoint to its apps; an endpoint not registered yet is
    /// left out. One index probe per endpoint and app (the outbox's `(client_id, txid,
    /// position)` index), so it is cheap enough for every scrape however long the backlog.
    public func lag(of endpoints: [String: Set<String>], logger: Logger? = nil) async throws -> [String: Double] {
        let logger = logger ?? self.logger
        let pairs = endpoints.flatMap { endpoint, clientIDs in clientIDs.map { (endpoint, $0) } }
        guard !pairs.isEmpty else { return [:] }
        let names = pairs.map(\.0)
        let clientIDs = pairs.map(\.1)
        let rows = try await StoreDatabase.run(logger) {
            try await client.query(
                """
                SELECT a.endpoint, coalesce(extract(epoch FROM now() - min(next.occurred_at)), 0)::float8
                FROM unnest(\(names)::text[], \(clientIDs)::text[]) AS a(endpoint, client_id)
                JOIN revoker.webhook_deliveries d ON d.endpoint = a.endpoint
                LEFT JOIN LATERAL (
                    SELECT e.occurred_at FROM revoker.outbox_events e
                    WHERE e.client_id = a.client_id
                      AND (d.cursor_txid IS NULL OR (e.txid, e.position) > (d.cursor_txid, d.cursor_position))
                    ORDER BY e.txid, e.position
                    LIMIT 1
                ) next ON true
                GROUP BY a.endpoint
                """,
                logger: logger
            ).collect()
        }
        var lag: [String: Double] = [:]
        for row in rows {
            let (endpoint, seconds) = try row.decode((String, Double).self)
            lag[endpoint] = max(0, seconds)
        }
        return lag
    }

    /// An endpoint's cursor as stored (both NULL before its first event).
    static func cursor(_ txid: String?, _ position: Int64?) -> EventCursor? {
        guard let txid, let position, let transaction = UInt64(txid) else { return nil }
        return EventCursor(transaction: transaction, position: position)
    }

}

/// The right to deliver to one endpoint for a while.
public struct DeliveryLease: Sendable, Equatable {
    public var endpoint: String
    public var owner: String
    public var fencingToken: Int64
    /// The last event delivered; nil when none was yet and the endpoint starts from the first.
    public var cursor: EventCursor?
    /// Failures of the next event so far.
    public var attempts: Int
    public var failingSince: Date?
}

/// An endpoint's delivery state, for `revoker status`, metrics and `GET /v1/events/deliveries`.
public struct DeliveryState: Sendable, Equatable {
    public var endpoint: String
    public var cursor: EventCursor?
    public var delivered: Int64
    public var attempts: Int
    public var nextAttemptAt: Date
    public var failingSince: Date?
    /// Set once the endpoint has failed for longer than the configured time; cleared by a 2xx.
    public var parkedSince: Date?
    public var lastAttemptAt: Date?
    public var lastStatus: Int?
    public var lastError: String?
    /// Whether a worker holds its lease now.
    public var delivering: Bool
}

extension DeliveryState {
    /// The state as one JSON object, for `revoker status --json` and `GET /v1/events/deliveries`.
    public var json: String {
        func time(_ date: Date?) -> String { date.map { WireFormat.jsonString(WireFormat.timestamp($0)) } ?? "null" }
        let members: [(String, String)] = [
            ("endpoint", WireFormat.jsonString(endpoint)),
            ("cursor", cursor.map { WireFormat.jsonString($0.description) } ?? "null"),
            ("delivered", String(delivered)),
            ("attempts", String(attempts)),
            ("delivering", String(delivering)),
            ("parked", String(parkedSince != nil)),
            ("failing_since", time(failingSince)),
            ("parked_since", time(parkedSince)),
            ("next_attempt_at", time(nextAttemptAt)),
            ("last_attempt_at", time(lastAttemptAt)),
            ("last_status", lastStatus.map(String.init) ?? "null"),
            ("last_error", lastError.map(WireFormat.jsonString) ?? "null"),
        ]
        return WireFormat.jsonObject(members)
    }
}
