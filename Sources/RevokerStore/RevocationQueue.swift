import Foundation
import Logging
import PostgresNIO

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
    /// Concurrent finishes and credential replacements share statements (copies of the queue share these).
    let finishes = GroupCommit<FinishRow>()
    let replacements = GroupCommit<ReplaceRow>()

    /// Creates a queue on a running `PostgresClient`.
    public init(client: PostgresClient, sealer: CredentialSealer, logger: Logger) {
        self.client = client
        self.sealer = sealer
        self.logger = logger
    }

    static let requestColumns = """
        r.id, r.client_id, r.external_reference, r.apple_user_id, r.credential_kind, r.enqueued_kind,
        (r.sealed_credential IS NOT NULL OR EXISTS (SELECT 1 FROM revoker.credential_intake ci WHERE ci.request_id = r.id)) AS has_credential,
        r.redirect_uri, r.state, r.outcome, r.attempts, r.max_attempts, r.run_after, r.lease_owner, r.lease_expires_at,
        r.fencing_token, r.last_error_code, r.last_error_description, r.requeued_from, r.created_at, r.updated_at, r.finished_at
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
        let outcome = try cells["outcome"].decode(String?.self).map { raw throws(RevokerStoreError) -> RevocationOutcome in
            guard let outcome = RevocationOutcome(rawValue: raw) else {
                throw RevokerStoreError(.unexpectedData, "unknown outcome in the database")
            }
            return outcome
        }
        return RevocationRequest(
            id: try cells["id"].decode(UUID.self),
            clientID: try cells["client_id"].decode(String.self),
            externalReference: try cells["external_reference"].decode(String.self),
            appleUserID: try cells["apple_user_id"].decode(String?.self),
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
            finishedAt: try cells["finished_at"].decode(Date?.self)
        )
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    static func validateActor(_ actor: String) throws(RevokerStoreError) {
        guard (1...200).contains(actor.count) else {
            throw RevokerStoreError(.invalidArgument, "actor must be 1-200 characters")
        }
    }

    /// Inserts audit events for a request, filling request columns from the row.
    static func insertEvents(
        _ events: [AuditEvent],
        requestID: UUID,
        actor: String,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        for event in events {
            try await connection.run(
                """
                INSERT INTO revoker.audit_events
                    (request_id, client_id, external_reference, apple_user_id, event, attempt, actor,
                     apple_endpoint, http_status, apple_error, apple_error_description, latency_ms, detail)
                SELECT r.id, r.client_id, r.external_reference, r.apple_user_id, \(event.event.rawValue), r.attempts, \(actor),
                       \(event.appleEndpoint), \(event.httpStatus), \(event.appleError), \(event.appleErrorDescription),
                       \(event.latencyMilliseconds), \(event.detail)
                FROM revoker.revocation_requests r WHERE r.id = \(requestID)
                """,
                logger: logger
            )
        }
    }

    // MARK: Enqueue

    /// Enqueues a revocation. A replay for a live request with the same credential returns
    /// `.existing`; a different credential or kind throws ``RevokerStoreError/Code/conflict``.
    public func enqueue(_ new: NewRevocation, actor: String) async throws -> EnqueueResult {
        try Self.validateActor(actor)
        guard !new.credential.secret.isEmpty, new.credential.secret.utf8.count <= 8192 else {
            throw RevokerStoreError(.invalidArgument, "the credential must be 1-8192 bytes")
        }
        guard (1...1000).contains(new.maxAttempts) else {
            throw RevokerStoreError(.invalidArgument, "maxAttempts must be between 1 and 1000")
        }
        let digest = new.credential.digest
        var logger = self.logger
        logger[metadataKey: "apple.client_id"] = "\(new.clientID)"

        for _ in 0..<10 {
            let id = UUID()
            let sealed = try self.sealer.seal(new.credential, requestID: id)
            let result: EnqueueResult? = try await StoreDatabase.run(logger) {
                try await self.client.withTransaction(logger: logger) { connection in
                    let inserted = try await connection.query(
                        """
                        INSERT INTO revoker.revocation_requests AS r
                            (id, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
                             sealed_credential, credential_key_id, credential_digest, redirect_uri, max_attempts)
                        VALUES (\(id), \(new.clientID), \(new.externalReference), \(new.appleUserID),
                                \(new.credential.kind.rawValue), \(new.credential.kind.rawValue), \(ByteBuffer(bytes: sealed.bytes)),
                                \(sealed.keyID), \(ByteBuffer(bytes: digest)), \(new.redirectURI), \(new.maxAttempts))
                        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') DO NOTHING
                        RETURNING \(unescaped: Self.requestColumns)
                        """,
                        logger: logger
                    ).collect()
                    if let row = inserted.first {
                        try await Self.insertEvents(
                            [AuditEvent(.enqueued, detail: "kind=\(new.credential.kind.rawValue)")],
                            requestID: id,
                            actor: actor,
                            on: connection,
                            logger: logger
                        )
                        return .created(try Self.decodeRequest(row))
                    }
                    let existing = try await connection.query(
                        """
                        SELECT \(unescaped: Self.requestColumns), r.credential_digest
                        FROM revoker.revocation_requests r
                        WHERE r.client_id = \(new.clientID) AND r.external_reference = \(new.externalReference)
                          AND r.state IN ('pending', 'running')
                        """,
                        logger: logger
                    ).collect()
                    guard let row = existing.first else { return nil }
                    let request = try Self.decodeRequest(row)
                    let storedDigest = Array(try row.makeRandomAccess()["credential_digest"].decode(ByteBuffer.self).readableBytesView)
                    guard storedDigest == digest, request.enqueuedKind == new.credential.kind else {
                        throw RevokerStoreError(
                            .conflict,
                            "a live revocation request for this external reference has a different credential"
                        )
                    }
                    return .existing(request)
                }
            }
            if let result {
                if case .created(let request) = result {
                    logger.debug("Enqueued revocation request", metadata: ["revoker.request.id": "\(request.id)"])
                }
                return result
            }
            // The live request finished between INSERT and SELECT: try again.
        }
        throw RevokerStoreError(.database, "could not enqueue: the live request kept changing")
    }

    // MARK: Intake

    /// Seals every credential waiting in the SQL intake (call on every worker wake-up);
    /// returns how many were sealed.
    @discardableResult
    public func sealIntake(batch: Int = 500) async throws -> Int {
        var total = 0
        while true {
            let sealed: Int = try await StoreDatabase.run(self.logger) {
                try await self.client.withTransaction(logger: self.logger) { connection in
                    let rows = try await connection.query(
                        """
                        SELECT i.request_id, i.credential, r.credential_kind
                        FROM revoker.credential_intake i JOIN revoker.revocation_requests r ON r.id = i.request_id
                        ORDER BY i.created_at
                        LIMIT \(batch)
                        FOR UPDATE OF i, r SKIP LOCKED
                        """,
                        logger: self.logger
                    ).collect()
                    for row in rows {
                        let (id, secret, rawKind) = try row.decode((UUID, String, String).self)
                        guard let kind = CredentialKind(rawValue: rawKind) else {
                            throw RevokerStoreError(.unexpectedData, "unknown credential kind in the database")
                        }
                        try await self.sealIntakeRow(id: id, credential: Credential(kind: kind, secret: secret), on: connection)
                    }
                    return rows.count
                }
            }
            total += sealed
            if sealed < batch { break }
        }
        if total > 0 {
            self.logger.debug("Sealed intake credentials", metadata: ["revoker.count": "\(total)"])
        }
        return total
    }

    func sealIntakeRow(id: UUID, credential: Credential, on connection: PostgresConnection) async throws {
        let sealed = try self.sealer.seal(credential, requestID: id)
        try await connection.run(
            """
            UPDATE revoker.revocation_requests
            SET sealed_credential = \(ByteBuffer(bytes: sealed.bytes)), credential_key_id = \(sealed.keyID), updated_at = now()
            WHERE id = \(id)
            """,
            logger: self.logger
        )
        try await connection.run("DELETE FROM revoker.credential_intake WHERE request_id = \(id)", logger: self.logger)
        try await Self.insertEvents(
            [AuditEvent(.credentialSealed, detail: "sealed from SQL intake")],
            requestID: id,
            actor: "worker",
            on: connection,
            logger: self.logger
        )
    }

    // MARK: Claim

    /// Claims up to `batch` due requests: authorization codes first, then oldest due; apps in
    /// `app_pauses` are skipped. Each becomes `running` under a new fencing token, its attempt
    /// counter goes up and a `claimed` event is written, all in one transaction. Intake
    /// credentials are sealed in the same transaction.
    ///
    /// A request whose credential cannot be opened (unknown key id, tampered) is not returned:
    /// it goes back to pending an hour later with error `credential_unreadable`, so one bad row
    /// cannot block the queue.
    public func claim(batch: Int, lease: Duration, owner: String) async throws -> [ClaimedRevocation] {
        guard (1...10_000).contains(batch) else {
            throw RevokerStoreError(.invalidArgument, "batch must be between 1 and 10000")
        }
        try Self.validateActor(owner)
        let leaseMilliseconds = Self.milliseconds(lease)
        guard leaseMilliseconds > 0 else {
            throw RevokerStoreError(.invalidArgument, "the lease must be positive")
        }
        return try await StoreDatabase.run(self.logger) {
            try await self.client.withTransaction(logger: self.logger) { connection in
                let rows = try await connection.query(
                    """
                    -- Paused apps are excluded through an InitPlan array, not NOT EXISTS: the anti-join's
                    -- row estimate (app_pauses is tiny and rarely analyzed) made the planner sort all due
                    -- rows; this form keeps the ordered scan of revocation_requests_claim (docs/store.md).
                    WITH candidates AS (
                        SELECT c.id FROM revoker.revocation_requests c
                        WHERE c.state = 'pending' AND c.run_after <= now()
                          AND c.client_id <> ALL (ARRAY(SELECT p.client_id FROM revoker.app_pauses p))
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
                    ), audit AS (
                        INSERT INTO revoker.audit_events
                            (request_id, client_id, external_reference, apple_user_id, event, attempt, actor)
                        SELECT claimed.id, claimed.client_id, claimed.external_reference, claimed.apple_user_id,
                               'claimed', claimed.attempts, \(owner)
                        FROM claimed
                    )
                    SELECT claimed.*, i.credential AS intake_credential
                    FROM claimed LEFT JOIN revoker.credential_intake i ON i.request_id = claimed.id
                    ORDER BY (claimed.credential_kind <> 'authorization_code'), claimed.run_after, claimed.id
                    """,
                    logger: self.logger
                ).collect()

                var result: [ClaimedRevocation] = []
                for row in rows {
                    var request = try Self.decodeRequest(row)
                    let cells = row.makeRandomAccess()
                    let sealedBytes = try cells["sealed_credential"].decode(ByteBuffer?.self).map { Array($0.readableBytesView) }
                    let keyID = try cells["credential_key_id"].decode(String?.self)
                    let intake = try cells["intake_credential"].decode(String?.self)
                    let credential: Credential
                    do {
                        if let sealedBytes, let keyID {
                            credential = try self.sealer.open(
                                SealedCredential(keyID: keyID, bytes: sealedBytes),
                                requestID: request.id,
                                kind: request.credentialKind
                            )
                        } else if let intake {
                            credential = Credential(kind: request.credentialKind, secret: intake)
                            try await self.sealIntakeRow(id: request.id, credential: credential, on: connection)
                        } else {
                            throw RevokerStoreError(.unexpectedData, "the request has no stored credential")
                        }
                    } catch let error as RevokerStoreError {
                        self.logger.error(
                            "Claimed request has an unreadable credential; deferring it",
                            metadata: ["revoker.request.id": "\(request.id)", "revoker.error.code": "\(error.code)"]
                        )
                        try await connection.run(
                            """
                            UPDATE revoker.revocation_requests
                            SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1,
                                run_after = now() + interval '1 hour', last_error_code = 'credential_unreadable',
                                last_error_description = \(error.message), updated_at = now()
                            WHERE id = \(request.id)
                            """,
                            logger: self.logger
                        )
                        try await Self.insertEvents(
                            [AuditEvent(.retryScheduled, detail: "credential cannot be opened (\(error.code)); retry in 1 hour")],
                            requestID: request.id,
                            actor: owner,
                            on: connection,
                            logger: self.logger
                        )
                        continue
                    }
                    request.hasCredential = true
                    guard let expiresAt = request.leaseExpiresAt else {
                        throw RevokerStoreError(.unexpectedData, "a claimed request has no lease expiry")
                    }
                    let lease = Lease(requestID: request.id, fencingToken: request.fencingToken, owner: owner, expiresAt: expiresAt)
                    result.append(ClaimedRevocation(request: request, credential: credential, lease: lease))
                }
                return result
            }
        }
    }
}
