import Foundation
import Logging
import PostgresNIO

/// Read access to the append-only audit trail.
public struct AuditLog: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Creates an audit log reader.
    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Runs a query; pages with keyset pagination on (occurred_at, id).
    ///
    /// Events are timestamped with the database's `clock_timestamp()` when inserted; a
    /// transaction that commits late can insert rows "behind" a cursor, so tail the log with
    /// a small overlap if completeness while writers are active matters.
    public func query(_ query: AuditQuery, logger: Logger? = nil) async throws -> AuditPage {
        let logger = logger ?? self.logger
        guard (1...1000).contains(query.limit) else {
            throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000")
        }
        var sql = """
            SELECT id, \(SQLTime.micros("occurred_at")), request_id, client_id, external_reference,
                   apple_user_id, event, attempt, actor, apple_endpoint, http_status, apple_error,
                   apple_error_description, latency_ms, detail
            FROM revoker.audit_events WHERE true
            """
        var binds = SQLBindings()
        if let value = query.requestID { sql += " AND request_id = \(binds.bind(value))" }
        if let value = query.externalReference { sql += " AND external_reference = \(binds.bind(value))" }
        if let value = query.clientID { sql += " AND client_id = \(binds.bind(value))" }
        if let value = query.clientIDs { sql += " AND client_id = ANY(\(binds.bind(value))::text[])" }
        if let value = query.userID { sql += " AND apple_user_id = \(binds.bind(value))" }
        if let value = query.from { sql += " AND occurred_at >= \(binds.bind(value))" }
        if let value = query.to { sql += " AND occurred_at < \(binds.bind(value))" }
        if let events = query.events { sql += " AND event = ANY(\(binds.bind(events.map(\.rawValue)))::text[])" }
        if let cursor = query.cursor {
            let (micros, id) = try Self.decodeCursor(cursor)
            sql += " AND (occurred_at, id) > (timestamptz 'epoch' + \(binds.bind(micros))::float8 * interval '1 microsecond', \(binds.bind(id)))"
        }
        sql += " ORDER BY occurred_at, id LIMIT \(binds.bind(query.limit + 1))"

        var records: [AuditRecord] = []
        var micros: [Int64] = []
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(binds.query(sql), logger: logger).collect()
        }
        for row in rows {
            let cells = try row.decode(
                (Int64, Int64, UUID?, String?, String?, String?, String, Int?, String, String?, Int?, String?, String?, Int?, String?).self
            )
            records.append(
                AuditRecord(
                    id: cells.0,
                    occurredAt: Date(timeIntervalSince1970: Double(cells.1) / 1_000_000),
                    requestID: cells.2,
                    clientID: cells.3,
                    externalReference: cells.4,
                    userID: cells.5,
                    event: cells.6,
                    attempt: cells.7,
                    actor: cells.8,
                    providerEndpoint: cells.9,
                    httpStatus: cells.10,
                    providerError: cells.11,
                    providerErrorDescription: cells.12,
                    latencyMilliseconds: cells.13,
                    detail: cells.14
                )
            )
            micros.append(cells.1)
        }
        var cursor: String?
        if records.count > query.limit {
            records.removeLast()
            micros.removeLast()
            if let last = records.last, let lastMicros = micros.last {
                cursor = Self.encodeCursor(micros: lastMicros, id: last.id)
            }
        }
        return AuditPage(records: records, nextCursor: cursor)
    }

    /// `v1.<microseconds>.<id>`: plain, so the API can document its exact shape.
    static func encodeCursor(micros: Int64, id: Int64) -> String {
        "v1.\(micros).\(id)"
    }

    static func decodeCursor(_ cursor: String) throws(RevokerStoreError) -> (Int64, Int64) {
        let parts = cursor.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1",
            parts[1...].allSatisfy({ (1...18).contains($0.count) && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let micros = Int64(parts[1]), let id = Int64(parts[2])
        else {
            throw RevokerStoreError(.invalidArgument, "malformed cursor")
        }
        return (micros, id)
    }
}
