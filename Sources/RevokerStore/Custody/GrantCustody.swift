import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// Grants held in custody from sign-in: a code or refresh token taken in, held once the
/// provider's answer proved it, validated now and then, and read by account. Every step that
/// calls the provider is a request in the queue, so custody shares the queue's database, sealer
/// and statement limit (``RevocationQueue/custody``).
public struct GrantCustody: Sendable {
    let queue: RevocationQueue
    var client: PostgresClient { queue.client }
    var sealer: CredentialSealer { queue.sealer }
    var logger: Logger { queue.logger }

    public init(queue: RevocationQueue) {
        self.queue = queue
    }

    /// Takes a grant into custody: the code or refresh token waits as a hold request (`pending`),
    /// claimed ahead of everything else, that a worker exchanges or validates at the provider; the
    /// grant is held once the provider's answer proved it live, bound to the user that answer's
    /// identity token names. An identity token the backend passes on proves who signed in, not
    /// whose token this is, so the user it names is only stated until the provider's answer.
    ///
    /// Registering the same code or token again returns `.existing`; for another account or
    /// provider it throws ``RevokerStoreError/Code/conflict``. `traceParent` is kept with the grant
    /// and its hold request.
    public func register(_ new: NewGrant, actor: String, traceParent: TraceParent? = nil, logger: Logger? = nil) async throws -> GrantRegistration {
        try RevocationQueue.validateActor(actor)
        var logger = logger ?? self.logger
        logger[metadataKey: "revoker.client_id"] = "\(new.clientID)"
        let (grantID, requestID) = (UUID(), UUID())
        let digest = ByteBuffer(bytes: new.credential.digest)
        // Sealed for its hold request: the worker opens it there.
        let sealed = try sealer.seal(new.credential, requestID: requestID)
        // An identity token that is itself the grant was verified at the edge: its user is proven.
        let isIdentity = new.credential.kind == .identityToken
        guard !isIdentity || new.userFromIdentityToken else {
            throw RevokerStoreError(.invalidArgument, "an identity token is registered as a grant only once verified")
        }
        let userSource: Grant.UserSource? = new.userID == nil ? nil : isIdentity ? .verifiedIDToken : .stated
        let events = [AuditEvent(.grantRegistered, detail: new.registeredDetail(grantID: grantID))]
        let registration: GrantRegistration = try await StoreDatabase.run(logger) {
            try await queue.transaction(logger: logger) { connection in
                let inserted = try await connection.query(
                    """
                    INSERT INTO revoker.grants
                        (id, provider, client_id, account_reference, user_id, user_source, registered_kind, registered_digest,
                         state, sealed_token, token_key_id, hold_request_id, held_at, trace_parent)
                    VALUES (\(grantID), \(new.provider), \(new.clientID), \(new.accountReference), \(new.userID), \(userSource?.rawValue),
                            \(new.credential.kind.rawValue), \(digest), 'pending', NULL, NULL, \(requestID), NULL, \(traceParent?.rawValue))
                    ON CONFLICT ON CONSTRAINT grants_registered_once DO NOTHING
                    RETURNING id
                    """,
                    logger: logger
                ).collect()
                guard !inserted.isEmpty else {
                    let rows = try await connection.query(
                        "SELECT \(unescaped: Self.grantColumns) FROM revoker.grants g \(unescaped: Self.grantJoin) WHERE g.client_id = \(new.clientID) AND g.registered_digest = \(digest)",
                        logger: logger
                    ).collect()
                    guard let row = rows.first else { throw RevokerStoreError(.database, "the registered grant vanished") }
                    let existing = try Self.decodeGrant(row)
                    guard existing.accountReference == new.accountReference, existing.provider == new.provider else {
                        throw RevokerStoreError(.conflict, "this code or token is registered for another account")
                    }
                    return .existing(existing)
                }
                _ = try await connection.query(
                    """
                    INSERT INTO revoker.revocation_requests
                        (id, provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
                         sealed_credential, credential_key_id, credential_digest, redirect_uri, purpose, grant_id,
                         state, outcome, finished_at)
                    VALUES (\(requestID), \(new.provider), \(new.clientID), \(new.accountReference), \(new.userID),
                            \(new.credential.kind.rawValue), \(new.credential.kind.rawValue),
                            \(ByteBuffer(bytes: sealed.bytes)), \(sealed.keyID), \(digest),
                            \(new.redirectURI), 'hold', \(grantID), 'pending', NULL, NULL)
                    """,
                    logger: logger
                ).collect()
                try await AuditWriter.write(events, requestID: requestID, actor: actor, on: connection, logger: logger)
                let rows = try await connection.query(
                    "SELECT \(unescaped: Self.grantColumns) FROM revoker.grants g \(unescaped: Self.grantJoin) WHERE g.id = \(grantID)",
                    logger: logger
                ).collect()
                guard let row = rows.first else { throw RevokerStoreError(.database, "the registered grant vanished") }
                return .created(try Self.decodeGrant(row))
            }
        }
        if case .created(let grant) = registration {
            queue.acknowledged.record(.init(.grant, id: grant.id, clientID: grant.clientID, reference: grant.accountReference))
        }
        return registration
    }

    /// Ends a hold request by taking its grant into custody: `refreshToken` sealed in the grant,
    /// bound to `verifiedUserID` when the identity token of the provider's answer verified (else
    /// the user stays as registered: stated, unproven). False when the lease
    /// is stale; the grant is then held all the same if it is still pending (the token is live
    /// and nobody else holds it), so an exchanged code is never lost.
    public func hold(
        _ lease: Lease,
        grantID: UUID,
        token: Credential,
        verifiedUserID: String?,
        events: [AuditEvent] = []
    ) async throws -> Bool {
        guard !token.secret.isEmpty, token.secret.utf8.count <= 8192 else {
            throw RevokerStoreError(.invalidArgument, "the token must be 1-8192 bytes")
        }
        guard token.kind != .authorizationCode else {
            throw RevokerStoreError(.invalidArgument, "a grant holds a token, not a code")
        }
        let sealed = try sealer.seal(token, grantID: grantID)
        let change = Fenced.Hold(
            sealed: Data(sealed.bytes).base64EncodedString(),
            keyID: sealed.keyID,
            kind: token.kind.rawValue,
            userID: verifiedUserID
        )
        let closing =
            events + [
                AuditEvent(.grantHeld, detail: "grant=\(grantID.uuidString.lowercased())"),
                AuditEvent(.succeeded, detail: "outcome=held"), AuditEvent(.credentialErased),
            ]
        if try await queue.applyFenced(FencedRow(lease, events: closing, change)) { return true }
        _ = try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                UPDATE revoker.grants g
                SET state = 'held', sealed_token = \(ByteBuffer(bytes: sealed.bytes)), token_key_id = \(sealed.keyID),
                    token_kind = \(token.kind.rawValue), held_at = now(), updated_at = now(), user_id = coalesce(\(verifiedUserID), g.user_id),
                    user_source = CASE WHEN \(verifiedUserID)::text IS NOT NULL THEN 'verified_id_token' ELSE g.user_source END
                WHERE g.id = \(grantID) AND g.state = 'pending'
                """,
                logger: logger
            ).collect()
        }
        logger.warning("Lease lost after taking a grant into custody; the grant is held all the same", metadata: ["revoker.grant.id": "\(grantID)"])
        return false
    }

    /// Schedules the validation of up to `limit` held grants that no validation has ended on for
    /// `every` (at least a day, as Apple asks), oldest first: each becomes a request of purpose
    /// ``RequestPurpose/validate`` that a worker carries like any other. Apps paused on a
    /// configuration fault are left alone. Returns how many were scheduled.
    public func scheduleValidations(every: Duration, limit: Int, actor: String, logger: Logger? = nil) async throws -> Int {
        try RevocationQueue.validateActor(actor)
        let logger = logger ?? self.logger
        guard every >= .seconds(86_400) else {
            throw RevokerStoreError(.invalidArgument, "a held grant is validated at most once a day: the interval must be at least 1 day")
        }
        guard (1...10_000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 10000") }
        let seconds = Double(every.components.seconds)
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                "SELECT revoker.schedule_grant_validations(make_interval(secs => \(seconds)), \(limit)::int, \(actor))",
                logger: logger
            ).collect().first?.decode(Int.self) ?? 0
        }
    }

    /// The grant with this id, or nil.
    public func grant(id: UUID, logger: Logger? = nil) async throws -> Grant? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                "SELECT \(unescaped: Self.grantColumns) FROM revoker.grants g \(unescaped: Self.grantJoin) WHERE g.id = \(id)",
                logger: logger
            ).collect().first.map(Self.decodeGrant)
        }
    }

    /// `grant` once a worker has exchanged its code (or refused it), or as it stands when `wait`
    /// runs out; a grant that is not pending is returned as it is.
    public func settled(_ grant: Grant, within wait: Duration, logger: Logger? = nil) async throws -> Grant {
        try await polling(grant, within: wait, until: { $0.state != .pending }, read: { try await self.grant(id: grant.id, logger: logger) })
    }

    /// The grants held for an account (every state), oldest first; only the apps in `clientIDs` when given.
    public func grants(accountReference: String, clientIDs: [String]? = nil, limit: Int = 100, logger: Logger? = nil) async throws -> [Grant] {
        let logger = logger ?? self.logger
        guard (1...1000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000") }
        return try await StoreDatabase.run(logger) {
            try await self.client.query(
                """
                SELECT \(unescaped: Self.grantColumns) FROM revoker.grants g \(unescaped: Self.grantJoin)
                WHERE g.account_reference = \(accountReference)
                  AND (\(clientIDs)::text[] IS NULL OR g.client_id = ANY(\(clientIDs)::text[]))
                ORDER BY g.created_at, g.id
                LIMIT \(limit)
                """,
                logger: logger
            ).collect().map(Self.decodeGrant)
        }
    }

    /// A grant's columns (never its token), with its hold request's last error.
    static let grantColumns = """
        g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.user_source, g.registered_kind, g.state, g.end_reason,
        g.hold_request_id, g.revoke_request_id, g.deletion_id, g.created_at, g.updated_at, g.held_at, g.ended_at, g.validated_at,
        h.last_error_code, h.last_error_description
        """
    static let grantJoin = "LEFT JOIN revoker.revocation_requests h ON h.id = g.hold_request_id AND g.state = 'failed'"

    static func decodeGrant(_ row: PostgresRow) throws -> Grant {
        let cells = row.makeRandomAccess()
        guard let state = GrantState(rawValue: try cells["state"].decode(String.self)),
            let kind = CredentialKind(rawValue: try cells["registered_kind"].decode(String.self))
        else { throw RevokerStoreError(.unexpectedData, "unknown grant state or kind in the database") }
        let errorCode = try cells["last_error_code"].decode(String?.self)
        return Grant(
            id: try cells["id"].decode(UUID.self),
            provider: try cells["provider"].decode(String.self),
            clientID: try cells["client_id"].decode(String.self),
            accountReference: try cells["account_reference"].decode(String.self),
            userID: try cells["user_id"].decode(String?.self),
            userSource: try cells["user_source"].decode(String?.self).flatMap(Grant.UserSource.init(rawValue:)),
            registeredKind: kind,
            state: state,
            endReason: try cells["end_reason"].decode(String?.self),
            holdRequestID: try cells["hold_request_id"].decode(UUID?.self),
            revokeRequestID: try cells["revoke_request_id"].decode(UUID?.self),
            deletionID: try cells["deletion_id"].decode(UUID?.self),
            createdAt: try cells["created_at"].decode(Date.self),
            updatedAt: try cells["updated_at"].decode(Date.self),
            heldAt: try cells["held_at"].decode(Date?.self),
            endedAt: try cells["ended_at"].decode(Date?.self),
            validatedAt: try cells["validated_at"].decode(Date?.self),
            error: try errorCode.map { ErrorDetail(code: $0, description: try cells["last_error_description"].decode(String?.self)) }
        )
    }
}

extension RevocationQueue {
    /// The grants held in custody, through this queue.
    public var custody: GrantCustody { GrantCustody(queue: self) }
    /// The accounts' deletions, through this queue.
    public var deletions: AccountDeletions { AccountDeletions(queue: self) }
}
