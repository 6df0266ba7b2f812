import Foundation
import Logging
import PostgresNIO
import RevokerProvider

extension RevocationQueue {
    /// Claims up to `batch` due requests: authorization codes first, then oldest due; apps in
    /// `app_pauses` are skipped. Each becomes `running` under a new fencing token, its attempt
    /// counter goes up and a `claimed` event is written, all in one transaction. Intake
    /// credentials are sealed in the same transaction.
    ///
    /// A request whose credential cannot be opened (unknown key id, tampered) is not returned:
    /// it goes back to pending an hour later with error `credential_unreadable`, so one bad row
    /// cannot block the queue.
    ///
    /// With `whileLive`, it claims only while `owner`'s liveness lock is held on the server the
    /// claim reaches, and throws ``RevokerStoreError/Code-swift.struct/livenessLost`` otherwise:
    /// a worker whose own session died unnoticed (a failover) must not take work that rescuers
    /// would soon take from it.
    public func claim(
        batch: Int,
        lease: Duration,
        owner: String,
        whileLive: Bool = false,
        logger: Logger? = nil
    ) async throws
        -> [ClaimedRevocation]
    {
        let logger = logger ?? self.logger
        guard (1...10_000).contains(batch) else {
            throw RevokerStoreError(.invalidArgument, "batch must be between 1 and 10000")
        }
        try Self.validateActor(owner)
        let leaseMilliseconds = lease.milliseconds
        guard leaseMilliseconds > 0 else {
            throw RevokerStoreError(.invalidArgument, "the lease must be positive")
        }
        let claimedEvent = try AuditWriter.json([AuditEvent(.claimed)])
        return try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    -- Paused apps are excluded through an InitPlan array, not NOT EXISTS: the anti-join's
                    -- row estimate (app_pauses is tiny and rarely analyzed) made the planner sort all due
                    -- rows; this form keeps the ordered scan of revocation_requests_claim (docs/store.md).
                    WITH liveness AS (
                        -- Registered and not suspected, and its lock held by a session: taking the lock
                        -- in shared mode fails only while one holds it (a free lock taken so lasts until commit).
                        SELECT EXISTS (SELECT 1 FROM revoker.workers w WHERE w.owner = \(owner) AND w.lock_lost_at IS NULL)
                               AND NOT pg_try_advisory_xact_lock_shared(\(Self.workerLockNamespace), revoker.worker_lock(\(owner))) AS live
                        WHERE \(whileLive)
                    ), candidates AS (
                        SELECT c.id FROM revoker.revocation_requests c
                        WHERE c.state = 'pending' AND c.run_after <= now()
                          AND c.client_id <> ALL (ARRAY(SELECT p.client_id FROM revoker.app_pauses p))
                          AND (NOT \(whileLive) OR (SELECT live FROM liveness))
                        ORDER BY (c.credential_kind <> 'authorization_code'), c.run_after, c.id
                        LIMIT \(batch)
                        FOR UPDATE SKIP LOCKED
                    ), claimed AS (
                        UPDATE revoker.revocation_requests r
                        SET state = 'running', lease_owner = \(owner),
                            lease_expires_at = now() + make_interval(secs => \(leaseMilliseconds)::float8 / 1000.0),
                            fencing_token = r.fencing_token + 1, attempts = r.attempts + 1, updated_at = now()
                        FROM candidates WHERE r.id = candidates.id
                        RETURNING \(unescaped: Self.requestColumns), r.sealed_credential, r.credential_key_id
                    ), claimed_events AS (
                        SELECT claimed.id, claimed.client_id, claimed.external_reference, claimed.apple_user_id, claimed.attempts,
                               \(owner)::text AS actor, \(claimedEvent)::jsonb AS events
                        FROM claimed
                    ), audit AS (
                        \(unescaped: AuditWriter.insert(from: "claimed_events"))
                    )
                    SELECT claimed.*, i.credential AS intake_credential, i.key_id AS intake_key_id, i.sealed AS intake_sealed,
                           held.sealed_token AS grant_sealed, held.token_key_id AS grant_key_id,
                           u.ends_account AS user_revocation,
                           -- Did an earlier attempt start exchanging this code?
                           (claimed.credential_kind = 'authorization_code' AND EXISTS (
                               SELECT 1 FROM revoker.audit_events a WHERE a.request_id = claimed.id AND a.event = 'exchange_started'
                           )) AS exchange_started
                    FROM claimed LEFT JOIN revoker.credential_intake i ON i.request_id = claimed.id
                    -- A deletion's request revokes a held grant with the grant's own sealed token, and a
                    -- validation proves it with that token.
                    LEFT JOIN revoker.grants held ON held.id = claimed.grant_id AND claimed.purpose IN ('revoke', 'validate')
                    -- Has the provider told us that this user revoked the app's grants, or deleted the account?
                    -- For a held grant, only since it was held: a sign-in after the message is a new consent.
                    LEFT JOIN LATERAL (
                        SELECT m.ends_account FROM revoker.provider_messages m
                        WHERE m.provider = claimed.provider AND m.client_id = claimed.client_id
                          AND m.user_id = claimed.apple_user_id AND m.ends_grants
                          AND (claimed.grant_id IS NULL OR m.received_at > held.held_at)
                        ORDER BY m.ends_account DESC
                        LIMIT 1
                    ) u ON true
                    ORDER BY (claimed.credential_kind <> 'authorization_code'), claimed.run_after, claimed.id
                    """,
                    logger: logger
                ).collect()
                if rows.isEmpty, whileLive, try await !Self.livenessHeld(owner: owner, on: connection, logger: logger) {
                    throw RevokerStoreError(.livenessLost, "this worker's liveness lock is not held; it takes it again before it claims")
                }

                var result: [ClaimedRevocation] = []
                for row in rows {
                    var request = try Self.decodeRequest(row)
                    let cells = row.makeRandomAccess()
                    let sealedBytes = try cells["sealed_credential"].decode(ByteBuffer?.self).map { Array($0.readableBytesView) }
                    let keyID = try cells["credential_key_id"].decode(String?.self)
                    let intake = try IntakeRow(
                        credential: cells["intake_credential"].decode(String?.self),
                        keyID: cells["intake_key_id"].decode(String?.self),
                        sealed: cells["intake_sealed"].decode(ByteBuffer?.self)
                    )
                    let grantSealed = try cells["grant_sealed"].decode(ByteBuffer?.self).map { Array($0.readableBytesView) }
                    let grantKeyID = try cells["grant_key_id"].decode(String?.self)
                    let credential: Credential
                    do {
                        if let grantID = request.grantID, request.purpose != .hold, let grantSealed, let grantKeyID {
                            credential = try self.sealer.open(
                                SealedCredential(keyID: grantKeyID, bytes: grantSealed),
                                grantID: grantID,
                                kind: request.credentialKind
                            )
                        } else if let sealedBytes, let keyID {
                            credential = try self.sealer.open(
                                SealedCredential(keyID: keyID, bytes: sealedBytes),
                                requestID: request.id,
                                kind: request.credentialKind
                            )
                        } else if let intake {
                            credential = try self.open(intake, kind: request.credentialKind)
                            try await self.sealIntakeRow(id: request.id, credential: credential, on: connection)
                        } else {
                            throw RevokerStoreError(.unexpectedData, "the request has no stored credential")
                        }
                    } catch let error as RevokerStoreError {
                        logger.error(
                            "Claimed request has an unreadable credential; deferring it",
                            metadata: ["revoker.request.id": "\(request.id)", "revoker.error": "\(error.code)"]
                        )
                        try await connection.run(
                            """
                            UPDATE revoker.revocation_requests
                            SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1,
                                run_after = now() + interval '1 hour', last_error_code = 'credential_unreadable',
                                last_error_description = \(error.message), updated_at = now()
                            WHERE id = \(request.id)
                            """,
                            logger: logger
                        )
                        try await AuditWriter.write(
                            [AuditEvent(.retryScheduled, detail: "credential cannot be opened (\(error.code)); retry in 1 hour")],
                            requestID: request.id,
                            actor: owner,
                            on: connection,
                            logger: logger
                        )
                        continue
                    }
                    request.hasCredential = true
                    guard let expiresAt = request.leaseExpiresAt else {
                        throw RevokerStoreError(.unexpectedData, "a claimed request has no lease expiry")
                    }
                    let lease = Lease(requestID: request.id, fencingToken: request.fencingToken, owner: owner, expiresAt: expiresAt)
                    let userRevocation = try cells["user_revocation"].decode(Bool?.self).map { $0 ? UserRevocation.accountDeleted : .consentRevoked }
                    result.append(
                        ClaimedRevocation(
                            request: request,
                            credential: credential,
                            lease: lease,
                            userRevocation: userRevocation,
                            exchangeStartedBefore: try cells["exchange_started"].decode(Bool.self)
                        )
                    )
                }
                return result
            }
        }
    }

    /// Whether `owner` is registered, not suspected, and its liveness lock held by a session
    /// (the claim's own condition, asked once it claimed nothing).
    static func livenessHeld(owner: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM revoker.workers w WHERE w.owner = \(owner) AND w.lock_lost_at IS NULL)
                   AND NOT pg_try_advisory_xact_lock_shared(\(Self.workerLockNamespace), revoker.worker_lock(\(owner)))
            """,
            logger: logger
        ).collect().first?.decode(Bool.self) ?? false
    }
}
