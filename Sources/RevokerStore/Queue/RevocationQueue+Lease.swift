import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// What a lease holder may do with its running request; each is a fenced change
/// (`RevocationQueue+Fenced.swift`) that does nothing, and answers false, once the lease is stale.
extension RevocationQueue {
    /// Moves the lease's expiry to now + `duration`. Returns false if the lease is stale.
    public func extendLease(_ lease: Lease, by duration: Duration) async throws -> Bool {
        try await extendLeases([lease], by: duration) == 1
    }

    /// Moves the expiry of every lease that is still current to now + `duration`, in one
    /// statement (a worker extends all its in-flight leases at once); returns how many it moved.
    public func extendLeases(_ leases: [Lease], by duration: Duration) async throws -> Int {
        let ms = duration.milliseconds
        guard ms > 0 else { throw RevokerStoreError(.invalidArgument, "the lease extension must be positive") }
        return try await applyFenced(leases.map { FencedRow($0, Fenced.Extend(extendMilliseconds: ms)) }).count
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
        let change = Fenced.Finish(
            state: state.rawValue,
            outcome: outcome.rawValue,
            keep: keep,
            errorCode: error.map { String($0.code.prefix(100)) },
            errorDescription: error?.description.map { String($0.prefix(500)) }
        )
        let applied = try await finishes.submit(FencedRow(lease, events: closing, change)) { rows in try await self.applyFencedBatch(rows) }
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
        let ms = max(0, delay.milliseconds)
        let detail = "in \(ms) ms" + (countsAttempt ? "" : ", attempt not counted")
        let scheduled = AuditEvent(.retryScheduled, providerError: error.map { String($0.code.prefix(100)) }, detail: detail)
        let change = Fenced.Reschedule(
            delayMilliseconds: ms,
            counts: countsAttempt,
            keepError: false,
            errorCode: error.map { String($0.code.prefix(100)) },
            errorDescription: error?.description.map { String($0.prefix(500)) }
        )
        let applied = try await applyFenced(FencedRow(lease, events: events + [scheduled], change))
        logFenced(lease, applied: applied, "Scheduled a retry")
        return applied
    }

    /// Gives a request back, attempt not counted, audited `released`: on shutdown pending now;
    /// when its app's rate limit has no slot for it soon, pending after `delay` (`why` says so).
    public func release(_ lease: Lease, after delay: Duration = .zero, why: String? = nil) async throws -> Bool {
        let change = Fenced.Reschedule(delayMilliseconds: delay.milliseconds, counts: false, keepError: true)
        let applied = try await applyFenced(FencedRow(lease, events: [AuditEvent(.released, detail: why)], change))
        logFenced(lease, applied: applied, "Released revocation request")
        return applied
    }

    /// Replaces the stored credential (after a code exchange, the refresh token), sealed, and
    /// changes the kind accordingly, before the worker revokes. Returns false if the lease is stale.
    /// Concurrent calls share one statement.
    public func replaceCredential(_ lease: Lease, with credential: Credential, events: [AuditEvent] = []) async throws -> Bool {
        guard !credential.secret.isEmpty, credential.secret.utf8.count <= 8192 else {
            throw RevokerStoreError(.invalidArgument, "the credential must be 1-8192 bytes")
        }
        let sealed = try self.sealer.seal(credential, requestID: lease.requestID)
        let change = Fenced.Replace(kind: credential.kind.rawValue, sealed: Data(sealed.bytes).base64EncodedString(), keyID: sealed.keyID)
        let applied = try await replacements.submit(FencedRow(lease, events: events, change)) { rows in
            try await self.applyFencedBatch(rows)
        }
        logFenced(lease, applied: applied, "Replaced the stored credential")
        return applied
    }

    /// Appends audit events for pipeline steps. Returns false (writing nothing) if the lease is stale.
    /// Concurrent calls share one statement.
    public func record(_ lease: Lease, events: [AuditEvent]) async throws -> Bool {
        try await records.submit(FencedRow(lease, events: events, Fenced.Record())) { rows in try await self.applyFencedBatch(rows) }
    }
}
