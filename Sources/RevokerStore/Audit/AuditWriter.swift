import Foundation
import Logging
import PostgresNIO

/// The one place audit events are written. Every statement that changes a request or an app
/// writes its events through here, in the same transaction as the change.
///
/// In the batched statements (claims, rescues, fenced changes) events travel as a JSON array
/// (one ``AuditWriter/Row`` each) beside the rows they belong to, so one statement writes any
/// number of events for any number of requests, in order; for one request or one app they are
/// bound values.
enum AuditWriter {
    /// One event as the writer's SQL reads it.
    struct Row: Encodable, Sendable {
        enum CodingKeys: String, CodingKey {
            case event
            case providerEndpoint = "apple_endpoint"
            case httpStatus = "http_status"
            case providerError = "apple_error"
            case providerErrorDescription = "apple_error_description"
            case latencyMilliseconds = "latency_ms"
            case detail
        }
        var event: String
        var providerEndpoint: String?
        var httpStatus: Int?
        var providerError: String?
        var providerErrorDescription: String?
        var latencyMilliseconds: Int?
        var detail: String?

        init(_ event: AuditEvent) {
            self.event = event.event.rawValue
            providerEndpoint = event.providerEndpoint
            httpStatus = event.httpStatus
            providerError = event.providerError
            providerErrorDescription = event.providerErrorDescription
            latencyMilliseconds = event.latencyMilliseconds
            detail = event.detail
        }
    }

    /// An `INSERT` writing the events of every row of `source`: a relation with the columns
    /// `id` (the request, or NULL for an app event), `client_id`, `external_reference`,
    /// `apple_user_id`, `attempts`, `actor` and `events` (a JSON array of ``Row``).
    static func insert(from source: String) -> String {
        """
        INSERT INTO revoker.audit_events
            (request_id, client_id, external_reference, apple_user_id, event, attempt, actor,
             apple_endpoint, http_status, apple_error, apple_error_description, latency_ms, detail)
        SELECT s.id, s.client_id, s.external_reference, s.apple_user_id, e.value->>'event', s.attempts, s.actor,
               e.value->>'apple_endpoint', (e.value->>'http_status')::int, e.value->>'apple_error',
               e.value->>'apple_error_description', (e.value->>'latency_ms')::int, e.value->>'detail'
        FROM \(source) s CROSS JOIN LATERAL jsonb_array_elements(s.events) WITH ORDINALITY AS e(value, n)
        ORDER BY s.id, e.n
        """
    }

    /// `events` as the JSON array ``insert(from:)`` reads.
    static func json(_ events: [AuditEvent]) throws -> String {
        String(decoding: try JSONEncoder().encode(events.map(Row.init)), as: UTF8.self)
    }

    /// Writes `events` for one request, its columns copied from the request's row.
    static func write(
        _ events: [AuditEvent],
        requestID: UUID,
        actor: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await write(events, requestID: requestID, clientID: nil, actor: actor, on: connection, logger: logger)
    }

    /// Writes `events` about an app as a whole (no request).
    static func write(
        _ events: [AuditEvent],
        clientID: String,
        actor: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        try await write(events, requestID: nil, clientID: clientID, actor: actor, on: connection, logger: logger)
    }

    /// Writes `events` about the service as a whole (the `revoker` chain).
    static func write(_ events: [AuditEvent], actor: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await write(events, requestID: nil, clientID: nil, actor: actor, on: connection, logger: logger)
    }

    /// With a request, its columns come from its row; without one, only `clientID` is known.
    /// The events are bound values here (one statement, no JSON): the enqueue path writes one
    /// event per request, and a JSON array costs it measurably (docs/benchmarks.md).
    private static func write(
        _ events: [AuditEvent],
        requestID: UUID?,
        clientID: String?,
        actor: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard !events.isEmpty else { return }
        var binds = SQLBindings()
        let (request, client, actor) = (binds.bind(requestID), binds.bind(clientID), binds.bind(actor))
        var rows: [String] = []
        for (index, event) in events.enumerated() {
            let values = [
                "\(binds.bind(event.event.rawValue))::text", "\(binds.bind(event.providerEndpoint))::text",
                "\(binds.bind(event.httpStatus))::int", "\(binds.bind(event.providerError))::text",
                "\(binds.bind(event.providerErrorDescription))::text", "\(binds.bind(event.latencyMilliseconds))::int",
                "\(binds.bind(event.detail))::text", "\(index)",
            ]
            rows.append("(" + values.joined(separator: ", ") + ")")
        }
        let sql = """
            INSERT INTO revoker.audit_events
                (request_id, client_id, external_reference, apple_user_id, event, attempt, actor,
                 apple_endpoint, http_status, apple_error, apple_error_description, latency_ms, detail)
            SELECT r.id, coalesce(r.client_id, \(client)::text), r.external_reference, r.apple_user_id, v.event, r.attempts, \(actor)::text,
                   v.endpoint, v.status, v.error, v.description, v.latency, v.detail
            FROM (VALUES \(rows.joined(separator: ", "))) AS v(event, endpoint, status, error, description, latency, detail, n)
            LEFT JOIN revoker.revocation_requests r ON r.id = \(request)::uuid
            ORDER BY v.n
            """
        try await connection.run(binds.query(sql), logger: logger)
    }
}
