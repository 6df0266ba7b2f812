import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// The durable revocation queue in PostgreSQL.
///
/// Every state change and its audit events are written in one transaction. Credentials are
/// sealed with ``CredentialSealer`` before they reach the database (or, for the SQL enqueue
/// path, at the latest in the transaction that claims them) and erased when a request is final.
public struct RevocationQueue: Sendable {
    /// The channel the insert trigger notifies.
    public static let wakeUpChannel = "revoker_requests"

    let client: PostgresClient
    let sealer: CredentialSealer
    let logger: Logger
    /// Concurrent finishes, credential replacements and recorded steps share statements (copies of the queue share these).
    let finishes = GroupCommit<FencedRow<Fenced.Finish>>()
    let replacements = GroupCommit<FencedRow<Fenced.Replace>>()
    let records = GroupCommit<FencedRow<Fenced.Record>>()
    /// What this process acknowledged lately, checked after the database fails over (copies share it).
    public let acknowledged = AcknowledgedWrites()
    /// How long the server may run one statement of a caller's write (``statementsLimited(to:)``);
    /// nil: the server's own setting.
    public private(set) var statementTimeout: Duration?
    /// How a connection that listens for wake-ups proves that the server still answers.
    public var listenHeartbeat = ListenHeartbeat.standard

    /// Creates a queue on a running `PostgresClient`.
    public init(client: PostgresClient, sealer: CredentialSealer, logger: Logger) {
        self.client = client
        self.sealer = sealer
        self.logger = logger
    }

    /// The same queue whose registrations, enqueues and deletions the server ends after `timeout`:
    /// a caller that stops waiting (an HTTP deadline) leaves no statement running behind it.
    public func statementsLimited(to timeout: Duration) -> RevocationQueue {
        var limited = self
        limited.statementTimeout = timeout
        return limited
    }

    /// Runs `body` in a transaction, under ``statementTimeout`` when one is set.
    func transaction<T: Sendable>(
        logger: Logger,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await client.withTransaction(logger: logger) { connection in
            if let statementTimeout {
                let milliseconds = max(1, statementTimeout.milliseconds)
                _ = try await connection.query("SELECT set_config('statement_timeout', \(String(milliseconds)), true)", logger: logger).collect()
            }
            return try await body(connection)
        }
    }

    static let requestColumns = """
        r.id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.credential_kind, r.enqueued_kind,
        (r.sealed_credential IS NOT NULL OR EXISTS (SELECT 1 FROM revoker.credential_intake ci WHERE ci.request_id = r.id)
         OR (r.purpose IN ('revoke', 'validate') AND r.grant_id IS NOT NULL AND r.state IN ('pending', 'running')
             AND EXISTS (SELECT 1 FROM revoker.grants cg WHERE cg.id = r.grant_id AND cg.sealed_token IS NOT NULL))) AS has_credential,
        r.redirect_uri, r.state, r.outcome, r.attempts, r.max_attempts, r.run_after, r.lease_owner, r.lease_expires_at,
        r.fencing_token, r.last_error_code, r.last_error_description, r.requeued_from, r.created_at, r.updated_at, r.finished_at,
        r.purpose, r.grant_id, r.deletion_id, r.trace_parent
        """

    static func decodeRequest(_ row: PostgresRow) throws -> RevocationRequest {
        let cells = row.makeRandomAccess()
        func kind(_ name: String) throws -> CredentialKind {
            guard let kind = CredentialKind(rawValue: try cells[name].decode(String.self)) else {
                throw RevokerStoreError(.unexpectedData, "unknown credential kind in the database")
            }
            return kind
        }
        guard let state = RevocationState(rawValue: try cells["state"].decode(String.self)) else {
            throw RevokerStoreError(.unexpectedData, "unknown request state in the database")
        }
        guard let purpose = RequestPurpose(rawValue: try cells["purpose"].decode(String.self)) else {
            throw RevokerStoreError(.unexpectedData, "unknown request purpose in the database")
        }
        let outcome = try cells["outcome"].decode(String?.self).map { raw throws(RevokerStoreError) -> RevocationOutcome in
            guard let outcome = RevocationOutcome(rawValue: raw) else {
                throw RevokerStoreError(.unexpectedData, "unknown outcome in the database")
            }
            return outcome
        }
        return RevocationRequest(
            id: try cells["id"].decode(UUID.self),
            provider: try cells["provider"].decode(String.self),
            clientID: try cells["client_id"].decode(String.self),
            externalReference: try cells["external_reference"].decode(String.self),
            userID: try cells["apple_user_id"].decode(String?.self),
            credentialKind: try kind("credential_kind"),
            enqueuedKind: try kind("enqueued_kind"),
            hasCredential: try cells["has_credential"].decode(Bool.self),
            redirectURI: try cells["redirect_uri"].decode(String?.self),
            state: state,
            outcome: outcome,
            attempts: try cells["attempts"].decode(Int.self),
            maxAttempts: try cells["max_attempts"].decode(Int.self),
            runAfter: try cells["run_after"].decode(Date.self),
            leaseOwner: try cells["lease_owner"].decode(String?.self),
            leaseExpiresAt: try cells["lease_expires_at"].decode(Date?.self),
            fencingToken: try cells["fencing_token"].decode(Int64.self),
            lastErrorCode: try cells["last_error_code"].decode(String?.self),
            lastErrorDescription: try cells["last_error_description"].decode(String?.self),
            requeuedFrom: try cells["requeued_from"].decode(UUID?.self),
            createdAt: try cells["created_at"].decode(Date.self),
            updatedAt: try cells["updated_at"].decode(Date.self),
            finishedAt: try cells["finished_at"].decode(Date?.self),
            purpose: purpose,
            grantID: try cells["grant_id"].decode(UUID?.self),
            deletionID: try cells["deletion_id"].decode(UUID?.self),
            traceParent: try cells["trace_parent"].decode(String?.self).flatMap { TraceParent($0) }
        )
    }

    static func validateActor(_ actor: String) throws(RevokerStoreError) {
        guard (1...200).contains(actor.unicodeScalars.count) else {
            throw RevokerStoreError(.invalidArgument, "actor must be 1-200 characters")
        }
    }
}
