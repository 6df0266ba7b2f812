import Foundation
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerProvider

/// Every provider's messages in PostgreSQL, in one statement each: stored (append-only, unique by
/// provider and message id) in `revoker.provider_messages`, audited, and, when the message ends
/// the user's grants, the user's live requests of that provider for the app ended
/// (`succeeded`/`revoked_by_user`, credential erased, any lease holder fenced out) without a
/// call to the provider. The table's triggers publish the outbox event the plug-in named and
/// end the user's held grants.
public struct ProviderMessages: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Where a stored message is kept among the writes this process acknowledged.
    let acknowledged: AcknowledgedWrites?

    public init(client: PostgresClient, logger: Logger, acknowledged: AcknowledgedWrites? = nil) {
        self.client = client
        self.logger = logger
        self.acknowledged = acknowledged
    }

    /// Stores `message` from `source` unless that provider's message of that id is there already.
    ///
    /// Returns once committed: only then may the sender be told that it was received.
    public func receive(_ message: ProviderMessage, from source: ProviderMessageSource, logger: Logger? = nil) async throws -> MessageReceipt {
        guard let kind = AuditEventKind(providerMessages: source.auditEvent) else {
            throw RevokerStoreError(.invalidArgument, "'\(source.auditEvent)' is not a plain name for an audit event")
        }
        let erasureCode = message.opensErasure ? ErasureRequests.newCode() : nil
        let insert: PostgresQuery = """
            INSERT INTO revoker.provider_messages
                (provider, message_id, client_id, type, user_id, ends_grants, ends_account, event_type,
                 issued_at, event_time, issuer, key_id, details, erasure_code)
            VALUES (\(source.provider.rawValue), \(message.id), \(message.clientID), \(message.type), \(message.userID),
                    \(message.endsGrants), \(message.endsAccount), \(message.eventType), \(message.issuedAt), \(message.eventTime),
                    \(message.issuer), \(message.keyID), \(try Self.detailsJSON(message.details))::jsonb, \(erasureCode))
            ON CONFLICT (provider, message_id) DO NOTHING
            RETURNING client_id, type, user_id
            """
        let receipt = try await receive(
            insert,
            provider: source.provider.rawValue,
            endsGrants: message.endsGrants,
            kind: kind,
            note: "\(message.type) from \(source.sender) (jti \(message.id.prefix(200)))",
            actor: source.actor,
            logger: logger ?? self.logger
        )
        if case .accepted = receipt {
            acknowledged?.record(.init(.message, id: message.id, clientID: message.clientID, provider: source.provider.rawValue))
        }
        return receipt
    }

    /// The code of the erasure request the message `messageID` of `provider` opened, when it
    /// opened one: the same for every receipt of the message.
    public func erasureCode(of messageID: String, from provider: ProviderName, logger: Logger? = nil) async throws -> String? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                "SELECT erasure_code FROM revoker.provider_messages WHERE provider = \(provider.rawValue) AND message_id = \(messageID)",
                logger: logger
            ).collect()
            return try rows.first?.decode(String?.self)
        }
    }

    /// How many messages `provider` sent that are kept (for status and tests).
    public func count(from provider: ProviderName, logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query(
                "SELECT count(*)::int FROM revoker.provider_messages WHERE provider = \(provider.rawValue)",
                logger: logger
            ).collect()
            return try rows.first?.decode(Int.self) ?? 0
        }
    }

    /// The provider's own fields as one JSON object: times in ISO 8601 with microseconds, as
    /// PostgreSQL reads them back into `timestamptz`; an absent value is left out.
    static func detailsJSON(_ details: [ProviderMessage.Detail]) throws -> String {
        var object: [String: Any] = [:]
        for detail in details {
            switch detail.value {
            case .text(let text): object[detail.name] = text
            case .time(let time): object[detail.name] = time.map(WireFormat.timestamp)
            case .flag(let flag): object[detail.name] = flag
            }
        }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// - Parameters:
    ///   - insert: `INSERT … ON CONFLICT DO NOTHING RETURNING client_id, type, user_id`.
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
        var binds = SQLBindings(after: insert.binds)
        let (providerBind, endsBind, actorBind) = (binds.bind(provider), binds.bind(endsGrants), binds.bind(actor))
        let (endedBind, noticeBind) = (binds.bind(endedEvents), binds.bind(noticeEvents))
        let sql = """
            WITH inserted AS (
                \(insert.sql)
            ), targets AS (
                SELECT r.id FROM revoker.revocation_requests r JOIN inserted i
                  ON r.provider = \(providerBind) AND r.client_id = i.client_id AND r.apple_user_id = i.user_id
                WHERE \(endsBind)::boolean AND r.state IN ('pending', 'running')
                ORDER BY r.id FOR UPDATE OF r
            ), ended AS (
                UPDATE revoker.revocation_requests r
                SET state = 'succeeded', outcome = 'revoked_by_user', finished_at = now(), updated_at = now(),
                    lease_owner = NULL, lease_expires_at = NULL, fencing_token = r.fencing_token + 1,
                    sealed_credential = NULL, credential_key_id = NULL
                FROM targets t
                WHERE r.id = t.id AND r.state IN ('pending', 'running')
                RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts,
                          \(actorBind)::text AS actor, \(endedBind)::jsonb AS events
            ), erased AS (
                DELETE FROM revoker.credential_intake c USING ended WHERE c.request_id = ended.id
            ), audited AS (
                SELECT NULL::uuid AS id, i.client_id, NULL::text AS external_reference, i.user_id AS apple_user_id, NULL::int AS attempts,
                       \(actorBind)::text AS actor, \(noticeBind)::jsonb AS events
                FROM inserted i
                UNION ALL
                SELECT * FROM ended
            ), audit AS (
                \(AuditWriter.insert(from: "audited"))
            )
            SELECT (SELECT count(*) FROM inserted)::int, (SELECT count(*) FROM ended)::int
            """
        let rows = try await StoreDatabase.run(logger) {
            try await client.query(binds.query(sql), logger: logger).collect()
        }
        guard let row = rows.first else { throw RevokerStoreError(.unexpectedData, "storing a provider's message returned no row") }
        let (inserted, ended) = try row.decode((Int, Int).self)
        return inserted == 0 ? .duplicate : .accepted(endedRequests: ended)
    }
}
