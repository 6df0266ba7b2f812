import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// Every provider's messages in PostgreSQL, in one statement each: stored (append-only, unique by
/// `jti`) in the provider's own table, audited, and, when the message ends the user's grants,
/// the user's live requests of that provider for the app ended (`succeeded`/`revoked_by_user`,
/// credential erased, any lease holder fenced out) without a call to the provider. Outbox events
/// come from the tables' triggers.
public struct ProviderMessages: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores `message` in `table` unless its `jti` is there already.
    ///
    /// Returns once committed: only then may the sender be told that it was received.
    public func receive(_ message: ProviderMessage, into table: ProviderMessageTable, logger: Logger? = nil) async throws -> MessageReceipt {
        guard let kind = AuditEventKind(rawValue: table.auditEvent) else {
            throw RevokerStoreError(.invalidArgument, "'\(table.auditEvent)' is not an audit event the trail knows")
        }
        let identifiers = [table.name, table.userColumn] + message.columns.map(\.name)
        guard identifiers.allSatisfy(Self.isIdentifier) else {
            throw RevokerStoreError(.invalidArgument, "a provider's message table or column is not a plain SQL name")
        }
        var binds = PostgresBindings()
        binds.append(message.id)
        binds.append(message.clientID)
        binds.append(message.type)
        binds.append(message.userID)
        binds.append(message.issuedAt)
        binds.append(message.issuer)
        binds.append(message.keyID)
        for column in message.columns {
            switch column.value {
            case .text(let text): binds.append(text)
            case .time(let time): binds.append(time)
            case .flag(let flag): binds.append(flag)
            }
        }
        let columns = ["jti", "client_id", "type", table.userColumn, "issued_at", "issuer", "key_id"] + message.columns.map(\.name)
        let insert = PostgresQuery(
            unsafeSQL: """
                INSERT INTO revoker.\(table.name) (\(columns.joined(separator: ", ")))
                VALUES (\((1...columns.count).map { "$\($0)" }.joined(separator: ", ")))
                ON CONFLICT (jti) DO NOTHING
                RETURNING client_id, type, \(table.userColumn) AS user_id
                """,
            binds: binds
        )
        return try await receive(
            insert,
            provider: table.provider.rawValue,
            endsGrants: message.endsGrants,
            kind: kind,
            note: "\(message.type) from \(table.sender) (jti \(message.id.prefix(200)))",
            actor: table.actor,
            logger: logger ?? self.logger
        )
    }

    /// How many messages `table` holds (for status and tests).
    public func count(in table: ProviderMessageTable, logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        guard Self.isIdentifier(table.name) else {
            throw RevokerStoreError(.invalidArgument, "a provider's message table is not a plain SQL name")
        }
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM revoker.\(table.name)"), logger: logger).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }

    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) || first == UInt8(ascii: "_") else {
            return false
        }
        return name.utf8.count <= 63
            && name.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || $0 == UInt8(ascii: "_")
            }
    }

    /// - Parameters:
    ///   - insert: `INSERT … ON CONFLICT (jti) DO NOTHING RETURNING client_id, type, <the user's id> AS user_id`.
    ///   - provider: whose requests the message can end.
    ///   - endsGrants: whether the message ends the user's grants.
    ///   - kind: the audit event that records the message.
    ///   - note: what the audit rows say of it (never a token).
    func receive(
        _ insert: PostgresQuery,
        provider: String,
        endsGrants: Bool,
        kind: AuditEventKind,
        note: String,
        actor: String,
        logger: Logger
    ) async throws -> MessageReceipt {
        let noticeEvents = try AuditWriter.json([AuditEvent(kind, detail: note)])
        let endedEvents = try AuditWriter.json([
            AuditEvent(kind, detail: note + ": the user's grant is gone"),
            AuditEvent(.succeeded, detail: "outcome=\(RevocationOutcome.revokedByUser.rawValue)"),
            AuditEvent(.credentialErased),
        ])
        var binds = insert.binds
        let first = binds.count + 1
        binds.append(provider)
        binds.append(endsGrants)
        binds.append(actor)
        binds.append(endedEvents)
        binds.append(noticeEvents)
        let (providerBind, endsBind, actorBind, endedBind, noticeBind) = (first, first + 1, first + 2, first + 3, first + 4)
        let sql = """
            WITH inserted AS (
                \(insert.sql)
            ), targets AS (
                SELECT r.id FROM revoker.revocation_requests r JOIN inserted i
                  ON r.provider = $\(providerBind) AND r.client_id = i.client_id AND r.apple_user_id = i.user_id
                WHERE $\(endsBind)::boolean AND r.state IN ('pending', 'running')
                ORDER BY r.id FOR UPDATE OF r
            ), ended AS (
                UPDATE revoker.revocation_requests r
                SET state = 'succeeded', outcome = 'revoked_by_user', finished_at = now(), updated_at = now(),
                    lease_owner = NULL, lease_expires_at = NULL, fencing_token = r.fencing_token + 1,
                    sealed_credential = NULL, credential_key_id = NULL
                FROM targets t
                WHERE r.id = t.id AND r.state IN ('pending', 'running')
                RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts,
                          $\(actorBind)::text AS actor, $\(endedBind)::jsonb AS events
            ), erased AS (
                DELETE FROM revoker.credential_intake c USING ended WHERE c.request_id = ended.id
            ), audited AS (
                SELECT NULL::uuid AS id, i.client_id, NULL::text AS external_reference, i.user_id AS apple_user_id, NULL::int AS attempts,
                       $\(actorBind)::text AS actor, $\(noticeBind)::jsonb AS events
                FROM inserted i
                UNION ALL
                SELECT * FROM ended
            ), audit AS (
                \(AuditWriter.insert(from: "audited"))
            )
            SELECT (SELECT count(*) FROM inserted)::int, (SELECT count(*) FROM ended)::int
            """
        let rows = try await StoreDatabase.run(logger) {
            try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).collect()
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "storing a provider's message returned no row") }
        let (inserted, ended) = try row.decode((Int, Int).self)
        return inserted == 0 ? .duplicate : .accepted(endedRequests: ended)
    }
}
