import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Runs `body` in a transaction after locking the request if `lease` is still current
    /// (running with the lease's fencing token). Returns false, changing nothing, otherwise.
    func fenced(
        _ lease: Lease,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws -> Bool {
        var logger = self.logger
        logger[metadataKey: "revoker.request.id"] = "\(lease.requestID)"
        let applied: Bool = try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    SELECT 1 FROM revoker.revocation_requests
                    WHERE id = \(lease.requestID) AND state = 'running' AND fencing_token = \(lease.fencingToken)
                    FOR UPDATE
                    """,
                    logger: logger
                ).collect()
                guard !rows.isEmpty else { return false }
                try await body(connection)
                return true
            }
        }
        logFenced(lease, applied: applied)
        return applied
    }

    /// Logs (debug) a fenced operation's result: `message` when it applied, the refusal when the lease was stale.
    func logFenced(_ lease: Lease, applied: Bool, _ message: Logger.Message? = nil, metadata: Logger.Metadata = [:]) {
        guard logger.logLevel <= .debug else { return }
        var metadata = metadata
        metadata["revoker.request.id"] = "\(lease.requestID)"
        if applied {
            if let message { logger.debug(message, metadata: metadata) }
        } else {
            metadata["revoker.fencing_token"] = "\(lease.fencingToken)"
            logger.debug("Fenced operation refused: the lease is stale", metadata: metadata)
        }
    }

    /// Moves the lease's expiry to now + `duration`. Returns false if the lease is stale.
    public func extendLease(_ lease: Lease, by duration: Duration) async throws -> Bool {
        try await extendLeases([lease], by: duration) == 1
    }

    /// Moves the expiry of every lease that is still current to now + `duration`, in one
    /// statement (a worker extends all its in-flight leases at once); returns how many it moved.
    public func extendLeases(_ leases: [Lease], by duration: Duration) async throws -> Int {
        let ms = Self.milliseconds(duration)
        guard ms > 0 else { throw RevokerStoreError(.invalidArgument, "the lease extension must be positive") }
        guard !leases.isEmpty else { return 0 }
        struct Row: Encodable {
            enum CodingKeys: String, CodingKey {
                case id
                case fencingToken = "fencing_token"
            }
            var id: UUID
            var fencingToken: Int64
        }
        let input = String(decoding: try JSONEncoder().encode(leases.map { Row(id: $0.requestID, fencingToken: $0.fencingToken) }), as: UTF8.self)
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(input)::jsonb) AS t(id uuid, fencing_token int8)
                ), locked AS (
                    \(unescaped: Self.lockInIDOrder)
                )
                UPDATE revoker.revocation_requests r
                SET lease_expires_at = now() + make_interval(secs => \(ms)::float8 / 1000.0), updated_at = now()
                FROM input i
                WHERE r.id = i.id AND r.id IN (SELECT id FROM locked) AND r.state = 'running' AND r.fencing_token = i.fencing_token
                RETURNING r.id
                """,
                logger: self.logger
            ).collect().count
        }
    }

    /// Finishes a request as `succeeded` or `failed` with `outcome`, erasing its credential
    /// (except for ``RevocationOutcome/clientMisconfigured``, which keeps the sealed value for
    /// ``requeueConfigurationFailures(clientID:actor:)``). Writes `events`, then a
    /// `succeeded`/`failed` event and `credential_erased`, in the same statement.
    /// Returns false if the lease is stale.
    ///
    /// Concurrent calls share one statement (and one commit): see `GroupCommit`.
    public func finish(
        _ lease: Lease,
        state: RevocationState,
        outcome: RevocationOutcome,
        error: ErrorDetail? = nil,
        events: [AuditEvent] = []
    ) async throws -> Bool {
        guard state == .succeeded || state == .failed, outcome.state == state else {
            throw RevokerStoreError(.invalidArgument, "outcome \(outcome) does not belong to state \(state)")
        }
        let keep = outcome == .clientMisconfigured
        var closing = events + [AuditEvent(state == .succeeded ? .succeeded : .failed, detail: "outcome=\(outcome.rawValue)")]
        if !keep { closing.append(AuditEvent(.credentialErased)) }
        let row = FinishRow(
            id: lease.requestID,
            fencingToken: lease.fencingToken,
            owner: lease.owner,
            state: state.rawValue,
            outcome: outcome.rawValue,
            keep: keep,
            errorCode: error.map { String($0.code.prefix(100)) },
            errorDescription: error?.description.map { String($0.prefix(500)) },
            events: closing.map(AuditWriter.Row.init)
        )
        let applied = try await finishes.submit(row) { rows in try await self.finishAll(rows) }
        logFenced(lease, applied: applied, "Finished revocation request", metadata: ["revoker.outcome": "\(outcome.rawValue)"])
        return applied
    }

    /// Schedules another attempt `after` from now (back to `pending`). With `countsAttempt`
    /// false the attempt is given back (an app paused on a configuration fault). Writes
    /// `events` and `retry_scheduled`. Returns false if the lease is stale.
    public func retry(
        _ lease: Lease,
        after delay: Duration,
        error: ErrorDetail?,
        countsAttempt: Bool = true,
        events: [AuditEvent] = []
    ) async throws -> Bool {
        let ms = max(0, Self.milliseconds(delay))
        let logger = self.logger
        return try await self.fenced(lease) { connection in
            try await AuditWriter.write(events, requestID: lease.requestID, actor: lease.owner, on: connection, logger: logger)
            try await connection.run(
                """
                UPDATE revoker.revocation_requests
                SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
                    run_after = now() + make_interval(secs => \(ms)::float8 / 1000.0),
                    attempts = CASE WHEN \(countsAttempt) THEN attempts ELSE greatest(attempts - 1, 0) END,
                    last_error_code = \(error.map { String($0.code.prefix(100)) }),
                    last_error_description = \(error?.description.map { String($0.prefix(500)) }),
                    updated_at = now()
                WHERE id = \(lease.requestID)
                """,
                logger: logger
            )
            let detail = "in \(ms) ms" + (countsAttempt ? "" : ", attempt not counted")
            try await AuditWriter.write(
                [AuditEvent(.retryScheduled, appleError: error.map { String($0.code.prefix(100)) }, detail: detail)],
                requestID: lease.requestID,
                actor: lease.owner,
                on: connection,
                logger: logger
            )
        }
    }

    /// Gives a request back on shutdown: pending now, attempt not counted, audited `released`.
    public func release(_ lease: Lease) async throws -> Bool {
        let logger = self.logger
        return try await self.fenced(lease) { connection in
            try await connection.run(
                """
                UPDATE revoker.revocation_requests
                SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = now(),
                    attempts = greatest(attempts - 1, 0), updated_at = now()
                WHERE id = \(lease.requestID)
                """,
                logger: logger
            )
            try await AuditWriter.write(
                [AuditEvent(.released)],
                requestID: lease.requestID,
                actor: lease.owner,
                on: connection,
                logger: logger
            )
        }
    }

    /// Replaces the stored credential (after a code exchange, the refresh token), sealed, and
    /// changes the kind accordingly, before the worker revokes. Returns false if the lease is stale.
    /// Concurrent calls share one statement.
    public func replaceCredential(_ lease: Lease, with credential: Credential, events: [AuditEvent] = []) async throws -> Bool {
        guard !credential.secret.isEmpty, credential.secret.utf8.count <= 8192 else {
            throw RevokerStoreError(.invalidArgument, "the credential must be 1-8192 bytes")
        }
        let sealed = try self.sealer.seal(credential, requestID: lease.requestID)
        let row = ReplaceRow(
            id: lease.requestID,
            fencingToken: lease.fencingToken,
            owner: lease.owner,
            kind: credential.kind.rawValue,
            sealed: Data(sealed.bytes).base64EncodedString(),
            keyID: sealed.keyID,
            events: events.map(AuditWriter.Row.init)
        )
        let applied = try await replacements.submit(row) { rows in try await self.replaceAll(rows) }
        logFenced(lease, applied: applied, "Replaced the stored credential")
        return applied
    }

    /// Appends audit events for pipeline steps. Returns false (writing nothing) if the lease is stale.
    public func record(_ lease: Lease, events: [AuditEvent]) async throws -> Bool {
        let logger = self.logger
        return try await self.fenced(lease) { connection in
            try await AuditWriter.write(events, requestID: lease.requestID, actor: lease.owner, on: connection, logger: logger)
        }
    }
}
