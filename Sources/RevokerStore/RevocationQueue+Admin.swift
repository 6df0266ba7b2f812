import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Returns running requests whose lease expired to `pending` (run now), audited `rescued`.
    /// The attempt stays counted, so a request that keeps crashing workers exhausts.
    @discardableResult
    public func rescueExpiredLeases() async throws -> Int {
        let rows = try await StoreDatabase.run(self.logger) {
            try await self.client.query(
                """
                WITH expired AS (
                    SELECT id FROM revoker.revocation_requests
                    WHERE state = 'running' AND lease_expires_at < now()
                    FOR UPDATE SKIP LOCKED
                ), rescued AS (
                    UPDATE revoker.revocation_requests r
                    SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, run_after = now(), updated_at = now()
                    FROM expired WHERE r.id = expired.id
                    RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts
                ), audit AS (
                    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
                    SELECT id, client_id, external_reference, apple_user_id, 'rescued', attempts, 'worker', 'lease expired'
                    FROM rescued
                )
                SELECT count(*)::int FROM rescued
                """,
                logger: self.logger
            ).collect()
        }
        let count = try rows.first?.decode(Int.self) ?? 0
        if count > 0 {
            self.logger.notice("Rescued requests with expired leases", metadata: ["revoker.count": "\(count)"])
        }
        return count
    }

    /// Cancels a pending request: final `cancelled`, credential erased, audited.
    public func cancel(id: UUID, actor: String) async throws -> CancelResult {
        try Self.validateActor(actor)
        let logger = self.logger
        return try await StoreDatabase.run(logger) {
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
                try await Self.insertEvents(
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
    }

    /// Requeues requests of `clientID` that failed with ``RevocationOutcome/clientMisconfigured``
    /// and still hold their sealed credential (only that outcome keeps it): each gets a fresh
    /// pending request (new id, credential re-sealed for it, attempts from zero, `requeued_from`
    /// set) and the old row's credential is erased. Skips a request whose external reference
    /// already has a live request. Call after fixing the app's configuration (and `resumeApp`).
    @discardableResult
    public func requeueConfigurationFailures(clientID: String, actor: String) async throws -> Int {
        try await requeue(clientID: clientID, only: nil, actor: actor).count
    }

    /// Requeues one request that failed with ``RevocationOutcome/clientMisconfigured``, as
    /// ``requeueConfigurationFailures(clientID:actor:)`` does for a whole app.
    public func requeueConfigurationFailure(id: UUID, actor: String) async throws -> RequeueResult {
        guard let request = try await self.request(id: id) else { return .notFound }
        guard request.state == .failed, request.outcome == .clientMisconfigured, request.hasCredential,
            let newID = try await requeue(clientID: request.clientID, only: id, actor: actor).first,
            let requeued = try await self.request(id: newID)
        else {
            return .notRequeueable(try await self.request(id: id) ?? request)
        }
        return .requeued(requeued)
    }

    /// Requeues `clientID`'s configuration failures (only `only`, when given); returns the new ids.
    private func requeue(clientID: String, only: UUID?, actor: String) async throws -> [UUID] {
        try Self.validateActor(actor)
        let logger = self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    SELECT id, external_reference, apple_user_id, credential_kind, enqueued_kind, sealed_credential,
                           credential_key_id, credential_digest, redirect_uri, max_attempts
                    FROM revoker.revocation_requests
                    WHERE client_id = \(clientID) AND state = 'failed' AND outcome = 'client_misconfigured'
                      AND sealed_credential IS NOT NULL AND (\(only)::uuid IS NULL OR id = \(only))
                    ORDER BY created_at
                    FOR UPDATE SKIP LOCKED
                    """,
                    logger: logger
                ).collect()
                var requeued: [UUID] = []
                for row in rows {
                    let (oldID, reference, appleUserID, rawKind, rawEnqueuedKind, sealedBuffer, keyID, digestBuffer, redirectURI, maxAttempts) =
                        try row.decode((UUID, String, String?, String, String, ByteBuffer, String, ByteBuffer, String?, Int).self)
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
                            (id, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind, sealed_credential,
                             credential_key_id, credential_digest, redirect_uri, max_attempts, requeued_from)
                        VALUES (\(newID), \(clientID), \(reference), \(appleUserID), \(rawKind), \(rawEnqueuedKind), \(ByteBuffer(bytes: sealed.bytes)),
                                \(sealed.keyID), \(ByteBuffer(bytes: digest)), \(redirectURI), \(maxAttempts), \(oldID))
                        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') DO NOTHING
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
                    try await Self.insertEvents(
                        [AuditEvent(.requeued, detail: "requeued as \(newID)"), AuditEvent(.credentialErased)],
                        requestID: oldID,
                        actor: actor,
                        on: connection,
                        logger: logger
                    )
                    try await Self.insertEvents(
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

    /// Pauses an app (its requests are not claimed) after a configuration fault; the worker
    /// probes again after `probeAfter`. Re-pausing updates the reason and probe time.
    public func pauseApp(clientID: String, reason: AppPauseReason, probeAfter: Duration, actor: String = "worker") async throws {
        try Self.validateActor(actor)
        let ms = max(0, Self.milliseconds(probeAfter))
        let logger = self.logger
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                try await connection.run(
                    """
                    INSERT INTO revoker.app_pauses (client_id, reason_code, reason_description, next_probe_at)
                    VALUES (\(clientID), \(String(reason.code.prefix(100))), \(reason.description.map { String($0.prefix(500)) }),
                            now() + make_interval(secs => \(ms)::float8 / 1000.0))
                    ON CONFLICT (client_id) DO UPDATE
                    SET reason_code = EXCLUDED.reason_code, reason_description = EXCLUDED.reason_description,
                        next_probe_at = EXCLUDED.next_probe_at
                    """,
                    logger: logger
                )
                try await connection.run(
                    """
                    INSERT INTO revoker.audit_events (client_id, event, actor, apple_error, detail)
                    VALUES (\(clientID), 'app_paused', \(actor), \(String(reason.code.prefix(100))),
                            \(reason.description.map { String($0.prefix(500)) }))
                    """,
                    logger: logger
                )
            }
        }
        logger.warning("Paused app after a configuration fault", metadata: ["apple.client_id": "\(clientID)", "revoker.reason": "\(reason.code)"])
    }

    /// Resumes a paused app. Returns false if it was not paused.
    @discardableResult
    public func resumeApp(clientID: String, actor: String = "worker") async throws -> Bool {
        try Self.validateActor(actor)
        let logger = self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    "DELETE FROM revoker.app_pauses WHERE client_id = \(clientID) RETURNING client_id",
                    logger: logger
                ).collect()
                guard !rows.isEmpty else { return false }
                try await connection.run(
                    "INSERT INTO revoker.audit_events (client_id, event, actor) VALUES (\(clientID), 'app_resumed', \(actor))",
                    logger: logger
                )
                return true
            }
        }
    }

    /// Currently paused apps.
    public func pausedApps() async throws -> [AppPause] {
        let rows = try await StoreDatabase.run(self.logger) {
            try await self.client.query(
                "SELECT client_id, reason_code, reason_description, paused_at, next_probe_at FROM revoker.app_pauses ORDER BY client_id",
                logger: self.logger
            ).collect()
        }
        return try rows.map { row in
            let (clientID, code, description, pausedAt, nextProbeAt) = try row.decode((String, String, String?, Date, Date).self)
            return AppPause(
                clientID: clientID,
                reason: AppPauseReason(code: code, description: description),
                pausedAt: pausedAt,
                nextProbeAt: nextProbeAt
            )
        }
    }

    /// Counts by state and outcome, the oldest due request's age, paused apps and unsealed
    /// intake rows. Scans the requests table: call it for metrics every few seconds, not per request.
    public func statistics() async throws -> QueueStatistics {
        try await StoreDatabase.run(self.logger) {
            var byState: [RevocationState: Int] = [:]
            var byOutcome: [QueueStatistics.Outcome: Int] = [:]
            for row in try await self.client.query(
                "SELECT state, outcome, count(*)::int FROM revoker.revocation_requests GROUP BY state, outcome",
                logger: self.logger
            ).collect() {
                let (rawState, rawOutcome, count) = try row.decode((String, String?, Int).self)
                guard let state = RevocationState(rawValue: rawState) else { continue }
                byState[state, default: 0] += count
                if let rawOutcome, let outcome = RevocationOutcome(rawValue: rawOutcome) {
                    byOutcome[QueueStatistics.Outcome(state: state, outcome: outcome), default: 0] += count
                }
            }
            let rows = try await self.client.query(
                """
                SELECT coalesce((extract(epoch FROM now() - min(run_after)) * 1000)::bigint, 0)
                         FROM revoker.revocation_requests WHERE state = 'pending' AND run_after <= now()
                """,
                logger: self.logger
            ).collect()
            let ageMilliseconds = try rows.first?.decode(Int64.self) ?? 0
            let counts = try await self.client.query(
                "SELECT (SELECT count(*)::int FROM revoker.app_pauses), (SELECT count(*)::int FROM revoker.credential_intake)",
                logger: self.logger
            ).collect()
            let (paused, intake) = try counts.first?.decode((Int, Int).self) ?? (0, 0)
            return QueueStatistics(
                byState: byState,
                byOutcome: byOutcome,
                oldestDueAge: .milliseconds(max(0, ageMilliseconds)),
                pausedApps: paused,
                unsealedIntake: intake
            )
        }
    }

    /// One request by id (without its credential), or nil.
    public func request(id: UUID) async throws -> RevocationRequest? {
        try await StoreDatabase.run(self.logger) {
            try await self.client.withConnection { connection in
                try await self.request(id: id, on: connection)
            }
        }
    }

    func request(id: UUID, on connection: PostgresConnection) async throws -> RevocationRequest? {
        let rows = try await connection.query(
            "SELECT \(unescaped: Self.requestColumns) FROM revoker.revocation_requests r WHERE r.id = \(id)",
            logger: self.logger
        ).collect()
        return try rows.first.map(Self.decodeRequest)
    }

    /// Requests matching `filter`, newest first.
    public func list(_ filter: RevocationFilter) async throws -> [RevocationRequest] {
        guard (1...1000).contains(filter.limit) else {
            throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000")
        }
        var sql = "SELECT \(Self.requestColumns) FROM revoker.revocation_requests r WHERE true"
        var binds = PostgresBindings()
        if let value = filter.clientID {
            binds.append(value)
            sql += " AND r.client_id = $\(binds.count)"
        }
        if let value = filter.externalReference {
            binds.append(value)
            sql += " AND r.external_reference = $\(binds.count)"
        }
        if let value = filter.appleUserID {
            binds.append(value)
            sql += " AND r.apple_user_id = $\(binds.count)"
        }
        if let value = filter.state {
            binds.append(value.rawValue)
            sql += " AND r.state = $\(binds.count)"
        }
        if let value = filter.createdBefore {
            binds.append(value)
            sql += " AND r.created_at < $\(binds.count)"
        }
        binds.append(filter.limit)
        sql += " ORDER BY r.created_at DESC, r.id DESC LIMIT $\(binds.count)"
        let rows = try await StoreDatabase.run(self.logger) {
            try await self.client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: self.logger).collect()
        }
        return try rows.map(Self.decodeRequest)
    }

    /// Deletes final requests that finished before `finishedBefore` (retention). Audit rows
    /// are never deleted. Returns the number of requests deleted.
    @discardableResult
    public func prune(finishedBefore: Date) async throws -> Int {
        let rows = try await StoreDatabase.run(self.logger) {
            try await self.client.query(
                """
                WITH deleted AS (
                    DELETE FROM revoker.revocation_requests
                    WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at < \(finishedBefore)
                    RETURNING 1
                ) SELECT count(*)::int FROM deleted
                """,
                logger: self.logger
            ).collect()
        }
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Listens for wake-ups (new requests inserted) for the duration of `body`, on a connection
    /// of its own. Notifications are hints: poll as well, since a notification sent while not
    /// listening is lost.
    public func withWakeUps<Result: Sendable>(
        _ body: @Sendable (WakeUps) async throws -> Result
    ) async throws -> Result {
        try await self.client.withConnection { connection in
            try await connection.listen(on: Self.wakeUpChannel) { notifications in
                try await body(WakeUps(base: notifications))
            }
        }
    }
}

/// Wake-up hints from the database: an element each time new requests were inserted.
public struct WakeUps: AsyncSequence, Sendable {
    public typealias Element = Void
    let base: PostgresNotificationSequence

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: self.base.makeAsyncIterator())
    }

    /// The iterator.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: PostgresNotificationSequence.AsyncIterator

        public mutating func next() async throws -> Void? {
            try await self.base.next().map { _ in () }
        }
    }
}
