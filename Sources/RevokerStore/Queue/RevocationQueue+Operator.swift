import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Cancels a pending request: final `cancelled`, credential erased, audited.
    public func cancel(id: UUID, actor: String, logger: Logger? = nil) async throws -> CancelResult {
        let logger = logger ?? self.logger
        try Self.validateActor(actor)
        let result: CancelResult = try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    SELECT r.state FROM revoker.revocation_requests r WHERE r.id = \(id) FOR UPDATE
                    """,
                    logger: logger
                ).collect()
                guard let row = rows.first else { return .notFound }
                if try row.decode(String.self) != RevocationState.pending.rawValue {
                    guard let request = try await self.request(id: id, on: connection) else { return .notFound }
                    return .notCancellable(request)
                }
                try await connection.run(
                    """
                    UPDATE revoker.revocation_requests
                    SET state = 'cancelled', outcome = 'cancelled', finished_at = now(), updated_at = now(),
                        sealed_credential = NULL, credential_key_id = NULL
                    WHERE id = \(id)
                    """,
                    logger: logger
                )
                try await connection.run("DELETE FROM revoker.credential_intake WHERE request_id = \(id)", logger: logger)
                try await AuditWriter.write(
                    [AuditEvent(.cancelled), AuditEvent(.credentialErased)],
                    requestID: id,
                    actor: actor,
                    on: connection,
                    logger: logger
                )
                guard let request = try await self.request(id: id, on: connection) else { return .notFound }
                return .cancelled(request)
            }
        }
        if case .cancelled(let request) = result { acknowledged.record(.init(.end, id: request.id, clientID: request.clientID)) }
        return result
    }

    /// Requeues requests of `clientID` that failed with ``RevocationOutcome/clientMisconfigured``
    /// and still hold their sealed credential (only that outcome keeps it): each gets a fresh
    /// pending request (new id, credential re-sealed for it, attempts from zero, `requeued_from`
    /// set) and the old row's credential is erased. Skips a request whose external reference
    /// already has a live request. Call after fixing the app's configuration (and `resumeApp`).
    @discardableResult
    public func requeueConfigurationFailures(clientID: String, actor: String, logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        return try await requeue(clientID: clientID, only: nil, actor: actor, logger: logger).count
    }

    /// Requeues one request that failed with ``RevocationOutcome/clientMisconfigured``, as
    /// ``requeueConfigurationFailures(clientID:actor:)`` does for a whole app.
    public func requeueConfigurationFailure(id: UUID, actor: String, logger: Logger? = nil) async throws -> RequeueResult {
        let logger = logger ?? self.logger
        guard let request = try await self.request(id: id, logger: logger) else { return .notFound }
        guard request.state == .failed, request.outcome == .clientMisconfigured, request.hasCredential,
            let newID = try await requeue(clientID: request.clientID, only: id, actor: actor, logger: logger).first,
            let requeued = try await self.request(id: newID)
        else {
            return .notRequeueable(try await self.request(id: id) ?? request)
        }
        return .requeued(requeued)
    }

    /// Requeues `clientID`'s configuration failures (only `only`, when given); returns the new ids.
    private func requeue(clientID: String, only: UUID?, actor: String, logger: Logger) async throws -> [UUID] {
        try Self.validateActor(actor)
        return try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    SELECT id, provider, external_reference, apple_user_id, credential_kind, enqueued_kind, sealed_credential,
                           credential_key_id, credential_digest, redirect_uri, max_attempts
                    FROM revoker.revocation_requests
                    WHERE client_id = \(clientID) AND state = 'failed' AND outcome = 'client_misconfigured'
                      AND sealed_credential IS NOT NULL AND grant_id IS NULL AND (\(only)::uuid IS NULL OR id = \(only))
                    ORDER BY created_at
                    FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                var requeued: [UUID] = []
                for row in rows {
                    let (
                        oldID, provider, reference, userID, rawKind, rawEnqueuedKind, sealedBuffer, keyID, digestBuffer, redirectURI, maxAttempts
                    ) =
                        try row.decode((UUID, String, String, String?, String, String, ByteBuffer, String, ByteBuffer, String?, Int).self)
                    let bytes = Array(sealedBuffer.readableBytesView)
                    let digest = Array(digestBuffer.readableBytesView)
                    guard let kind = CredentialKind(rawValue: rawKind), CredentialKind(rawValue: rawEnqueuedKind) != nil else {
                        throw RevokerStoreError(.unexpectedData, "unknown credential kind in the database")
                    }
                    let credential = try self.sealer.open(SealedCredential(keyID: keyID, bytes: bytes), requestID: oldID, kind: kind)
                    let newID = UUID()
                    let sealed = try self.sealer.seal(credential, requestID: newID)
                    let inserted = try await connection.query(
                        """
                        INSERT INTO revoker.revocation_requests
                            (id, provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind, sealed_credential,
                             credential_key_id, credential_digest, redirect_uri, max_attempts, requeued_from)
                        VALUES (\(newID), \(provider), \(clientID), \(reference), \(userID), \(rawKind), \(rawEnqueuedKind), \(ByteBuffer(bytes: sealed.bytes)),
                                \(sealed.keyID), \(ByteBuffer(bytes: digest)), \(redirectURI), \(maxAttempts), \(oldID))
                        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') AND grant_id IS NULL DO NOTHING
                        RETURNING id
                        """,
                        logger: logger
                    ).collect()
                    guard !inserted.isEmpty else { continue }
                    try await connection.run(
                        """
                        UPDATE revoker.revocation_requests SET sealed_credential = NULL, credential_key_id = NULL, updated_at = now()
                        WHERE id = \(oldID)
                        """,
                        logger: logger
                    )
                    try await AuditWriter.write(
                        [AuditEvent(.requeued, detail: "requeued as \(newID)"), AuditEvent(.credentialErased)],
                        requestID: oldID,
                        actor: actor,
                        on: connection,
                        logger: logger
                    )
                    try await AuditWriter.write(
                        [AuditEvent(.enqueued, detail: "requeued from \(oldID)")],
                        requestID: newID,
                        actor: actor,
                        on: connection,
                        logger: logger
                    )
                    requeued.append(newID)
                }
                return requeued
            }
        }
    }
}
