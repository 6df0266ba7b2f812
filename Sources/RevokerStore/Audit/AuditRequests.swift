import Foundation
import Logging
import PostgresNIO

/// A revocation request as its audit trail tells it. Found from its `enqueued` row, so it
/// outlives the request itself once `revoker prune` removed it from the queue.
public struct AuditRequestSummary: Sendable, Hashable {
    /// The request's id.
    public var requestID: UUID
    /// When it was enqueued.
    public var requestedAt: Date
    /// Who enqueued it (the `enqueued` row's actor).
    public var requestedBy: String
    /// Its app.
    public var clientID: String?
    /// The app backend's reference.
    public var externalReference: String?
    /// The user id its rows name, the latest one when several do.
    public var userID: String?
    /// The final outcome (`revoked`, `already_invalid`, …, `cancelled`); nil while in progress.
    public var outcome: String?
    /// When it ended; nil while in progress.
    public var finishedAt: Date?
    /// The archive file that holds its audit rows (`revoker audit archive`); nil while they are here.
    public var archive: String? = nil
}

/// What compliance staff search for. Every criterion is optional; all given ones must hold.
public struct AuditRequestSearch: Sendable, Hashable {
    /// Only this external reference.
    public var externalReference: String?
    /// Only requests whose rows name this user id.
    public var userID: String?
    /// Only this app.
    public var clientID: String?
    /// Only these apps (an API key's limit), when set.
    public var clientIDs: [String]?
    /// Only this outcome; ``inProgress`` for requests without one yet.
    public var outcome: String?
    /// Enqueued at or after this.
    public var from: Date?
    /// Enqueued before this.
    public var to: Date?
    /// The `nextCursor` of the previous page.
    public var cursor: String?
    /// Page size, 1...1000.
    public var limit: Int

    /// The outcome value that finds requests not yet final.
    public static let inProgress = "in_progress"

    /// Creates a search.
    public init(
        externalReference: String? = nil,
        userID: String? = nil,
        clientID: String? = nil,
        outcome: String? = nil,
        from: Date? = nil,
        to: Date? = nil,
        cursor: String? = nil,
        limit: Int = 50
    ) {
        self.externalReference = externalReference
        self.userID = userID
        self.clientID = clientID
        self.outcome = outcome
        self.from = from
        self.to = to
        self.cursor = cursor
        self.limit = limit
    }
}

/// One page of found requests, newest first.
public struct AuditRequestPage: Sendable, Hashable {
    /// The requests.
    public var requests: [AuditRequestSummary]
    /// Pass as the next search's cursor for older requests; nil on the last page.
    public var nextCursor: String?
}

/// Reads requests out of the audit trail: what the compliance pages search and count.
public struct AuditRequests: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// Creates a reader.
    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The outcome a request's last final row states (SQL over a row `f`).
    static let outcomeSQL = """
        CASE WHEN f.event IS NULL THEN NULL
             WHEN f.event = 'cancelled' THEN 'cancelled'
             WHEN f.detail LIKE 'outcome=%' THEN substr(f.detail, 9)
             ELSE f.event END
        """

    /// Requests matching `search`, newest first, paged on (enqueued time, row id).
    public func search(_ search: AuditRequestSearch, logger: Logger? = nil) async throws -> AuditRequestPage {
        let logger = logger ?? self.logger
        guard (1...1000).contains(search.limit) else {
            throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000")
        }
        let cursor = try search.cursor.map(AuditLog.decodeCursor)
        let outcome = search.outcome == AuditRequestSearch.inProgress ? nil : search.outcome
        let onlyInProgress = search.outcome == AuditRequestSearch.inProgress
        // Only the filters given are written: a filter OR'd with "no filter" keeps the planner from
        // starting at the user's few rows, and it scanned the whole trail newest first instead.
        var binds = SQLBindings()
        func bind(_ value: some PostgresEncodable) throws -> String { try binds.bind(value) }
        var conditions = ["e.event = 'enqueued'", "e.request_id IS NOT NULL"]
        // Archived requests (migration 0022) are found by what the archive kept of them.
        var archived: [String] = []
        func filter<Value: PostgresEncodable>(_ value: Value?, live: (String) -> String, archive: (String) -> String) throws {
            guard let value else { return }
            let placeholder = try bind(value)
            conditions.append(live(placeholder))
            archived.append(archive(placeholder))
        }
        try filter(search.externalReference, live: { "e.external_reference = \($0)" }, archive: { "r.external_reference = \($0)" })
        try filter(search.clientID, live: { "e.client_id = \($0)" }, archive: { "r.client_id = \($0)" })
        try filter(search.clientIDs, live: { "e.client_id = ANY(\($0)::text[])" }, archive: { "r.client_id = ANY(\($0)::text[])" })
        // The requests whose rows here name the user.
        let named = { (user: String) in "(SELECT a.request_id FROM revoker.audit_events a WHERE a.apple_user_id = \(user))" }
        try filter(
            search.userID,
            live: { "e.request_id IN \(named($0))" },
            // Any id its archived rows named, or one its rows still here name.
            archive: { "(r.user_ids @> ARRAY[\($0)::text] OR r.request_id IN \(named($0)))" }
        )
        try filter(search.from, live: { "e.occurred_at >= \($0)" }, archive: { "r.requested_at >= \($0)" })
        try filter(search.to, live: { "e.occurred_at < \($0)" }, archive: { "r.requested_at < \($0)" })
        if let (micros, id) = cursor {
            let (at, row) = (try bind(micros), try bind(id))
            conditions.append("(e.occurred_at, e.id) < (timestamptz 'epoch' + \(at) * interval '1 microsecond', \(row))")
            archived.append("(r.requested_at, r.enqueued_id) < (timestamptz 'epoch' + \(at) * interval '1 microsecond', \(row))")
        }
        try filter(outcome, live: { "\(Self.outcomeSQL) = \($0)" }, archive: { "coalesce(r.outcome, \(Self.outcomeSQL)) = \($0)" })
        if onlyInProgress {
            conditions.append("f.event IS NULL")
            archived.append("r.outcome IS NULL AND f.event IS NULL")
        }
        let limit = try bind(search.limit + 1)
        // A request's final row may still be here when its first rows were archived.
        let finalRow = { (request: String) in
            """
            LEFT JOIN LATERAL (
                SELECT x.event, x.detail, x.occurred_at FROM revoker.audit_events x
                WHERE x.request_id = \(request) AND x.event IN ('succeeded', 'failed', 'cancelled')
                ORDER BY x.occurred_at DESC, x.id DESC LIMIT 1
            ) f ON true
            """
        }
        let sql = binds.query(
            """
            (SELECT e.request_id, e.id, \(SQLTime.micros("e.occurred_at")), e.actor, e.client_id,
                   e.external_reference,
                   coalesce((SELECT u.apple_user_id FROM revoker.audit_events u
                             WHERE u.request_id = e.request_id AND u.apple_user_id IS NOT NULL
                             ORDER BY u.occurred_at DESC, u.id DESC LIMIT 1), e.apple_user_id),
                   \(Self.outcomeSQL), \(SQLTime.micros("f.occurred_at")), NULL::text
            FROM revoker.audit_events e
            \(finalRow("e.request_id"))
            WHERE \(conditions.joined(separator: "\n  AND "))
            ORDER BY e.occurred_at DESC, e.id DESC
            LIMIT \(limit))
            UNION ALL
            (SELECT r.request_id, r.enqueued_id, \(SQLTime.micros("r.requested_at")), r.requested_by, r.client_id,
                   r.external_reference, r.user_id, coalesce(r.outcome, \(Self.outcomeSQL)),
                   \(SQLTime.micros("coalesce(r.finished_at, f.occurred_at)")), h.file_name
            FROM revoker.audit_archived_requests r
            JOIN revoker.audit_archives h ON h.id = r.archive_id
            \(finalRow("r.request_id"))
            \(archived.isEmpty ? "" : "WHERE " + archived.joined(separator: "\n  AND "))
            ORDER BY r.requested_at DESC, r.enqueued_id DESC
            LIMIT \(limit))
            ORDER BY 3 DESC, 2 DESC
            LIMIT \(limit)
            """
        )
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(sql, logger: logger).collect()
        }
        var found: [(summary: AuditRequestSummary, id: Int64, micros: Int64)] = []
        for row in rows {
            let (requestID, id, micros, actor, clientID, reference, userID, outcome, finished, archive) = try row.decode(
                (UUID, Int64, Int64, String, String?, String?, String?, String?, Int64?, String?).self
            )
            let summary = AuditRequestSummary(
                requestID: requestID,
                requestedAt: Self.date(micros),
                requestedBy: actor,
                clientID: clientID,
                externalReference: reference,
                userID: userID,
                outcome: outcome,
                finishedAt: finished.map(Self.date),
                archive: archive
            )
            found.append((summary, id, micros))
        }
        var next: String?
        if found.count > search.limit {
            found.removeLast()
            next = found.last.map { AuditLog.encodeCursor(micros: $0.micros, id: $0.id) }
        }
        return AuditRequestPage(requests: found.map(\.summary), nextCursor: next)
    }

    /// Where the audit rows of request `id` went when an archive took them: the file, its
    /// SHA-256 and when; nil when they were not archived.
    public func archive(of id: UUID, logger: Logger? = nil) async throws -> (file: String, sha256: [UInt8], archivedAt: Date)? {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT h.file_name, h.file_sha256, h.archived_at FROM revoker.audit_archived_requests r
                JOIN revoker.audit_archives h ON h.id = r.archive_id WHERE r.request_id = \(id)
                """,
                logger: logger
            ).collect()
        }
        return try rows.first.map { row in
            let (file, sha256, at) = try row.decode((String, Data, Date).self)
            return (file, Array(sha256), at)
        }
    }

    /// Requests that failed since `since`, counted by outcome, most frequent first.
    public func failures(since: Date, clientIDs: [String]? = nil, logger: Logger? = nil) async throws -> [(outcome: String, count: Int)] {
        let logger = logger ?? self.logger
        let rows = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT CASE WHEN detail LIKE 'outcome=%' THEN substr(detail, 9) ELSE 'unknown' END AS outcome, count(*)::int
                FROM revoker.audit_events
                WHERE event = 'failed' AND occurred_at >= \(since)
                  AND (\(clientIDs)::text[] IS NULL OR client_id = ANY(\(clientIDs)::text[]))
                GROUP BY 1 ORDER BY 2 DESC, 1
                """,
                logger: logger
            ).collect()
        }
        return try rows.map { row in
            let (outcome, count) = try row.decode((String, Int).self)
            return (outcome, count)
        }
    }

    static func date(_ micros: Int64) -> Date {
        Date(timeIntervalSince1970: Double(micros) / 1_000_000)
    }
}
