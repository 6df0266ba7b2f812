import Foundation
import Logging
import PostgresNIO
import RevokerProvider

/// The deletions of accounts by reference: each revokes every grant held for the account
/// (and a credential the backend still has) through the queue, in bounded batches, and ends with
/// one outcome. Shares the queue's database, sealer and statement limit
/// (``RevocationQueue/deletions``).
public struct AccountDeletions: Sendable {
    let queue: RevocationQueue
    var client: PostgresClient { queue.client }
    var sealer: CredentialSealer { queue.sealer }
    var logger: Logger { queue.logger }

    public init(queue: RevocationQueue) {
        self.queue = queue
    }

    /// Asks for the deletion of an account: every live grant held for `accountReference` in the
    /// apps `clientIDs` (every app when nil) gets one revocation request, through the same queue
    /// as every request; a grant still being taken in gets its request once it is held.
    /// `credential`, when given, is a grant Revoker never saw, revoked as part of the deletion.
    ///
    /// One deletion of an account runs at a time: asking again while it runs returns it
    /// (`.existing`) when it covers the same apps and carries the same credential, and throws
    /// ``RevokerStoreError/Code/conflict`` otherwise. A deletion that covers nothing completes at
    /// once as `nothing_held`. `traceParent` is kept with the deletion, and every request it makes
    /// continues that trace.
    public func request(
        accountReference: String,
        clientIDs: [String]? = nil,
        credential: NewRevocation? = nil,
        actor: String,
        traceParent: TraceParent? = nil,
        logger: Logger? = nil
    ) async throws -> DeletionResult {
        try RevocationQueue.validateActor(actor)
        let logger = logger ?? self.logger
        if let credential, credential.externalReference != accountReference {
            throw RevokerStoreError(.invalidArgument, "a deletion's credential must name the account as its external reference")
        }
        let requestID = UUID()
        let sealed = try credential.map { try sealer.seal($0.credential, requestID: requestID) }
        let scope = clientIDs.map { Array(Set($0)).sorted() }
        let result: DeletionResult = try await StoreDatabase.run(logger) {
            try await queue.transaction(logger: logger) { connection in
                if let traceParent {
                    // Read by the insert triggers of migration 0021: the deletion and the requests it makes keep it.
                    _ = try await connection.query("SELECT set_config('revoker.trace_parent', \(traceParent.rawValue), true)", logger: logger)
                        .collect()
                }
                let started = try await connection.query(
                    "SELECT deletion_id, created FROM revoker.start_account_deletion(\(accountReference), \(scope)::text[], \(actor))",
                    logger: logger
                ).collect()
                guard let (id, created) = try started.first?.decode((UUID, Bool).self) else {
                    throw RevokerStoreError(.database, "the deletion was not recorded")
                }
                if created, let credential, let sealed {
                    let inserted = try await RevocationQueue.insert(
                        credential,
                        id: requestID,
                        sealed: sealed,
                        deletionID: id,
                        actor: actor,
                        on: connection,
                        logger: logger
                    )
                    guard inserted != nil else {
                        throw RevokerStoreError(
                            .conflict,
                            "a live revocation request for this account's reference holds the credential's app; cancel it or let it end first"
                        )
                    }
                } else if let credential {
                    // Asked again: the live deletion must already carry this credential.
                    let carried = try await connection.query(
                        """
                        SELECT 1 FROM revoker.revocation_requests r
                        WHERE r.deletion_id = \(id) AND r.grant_id IS NULL AND r.client_id = \(credential.clientID)
                          AND r.enqueued_kind = \(credential.credential.kind.rawValue)
                          AND r.credential_digest = \(ByteBuffer(bytes: credential.credential.digest))
                        """,
                        logger: logger
                    ).collect()
                    guard !carried.isEmpty else {
                        throw RevokerStoreError(.conflict, "a deletion of this account is under way without this credential (\(id))")
                    }
                }
                _ = try await connection.query("SELECT revoker.complete_deletion(\(id))", logger: logger).collect()
                guard let deletion = try await Self.deletions(where: "d.id", is: id, clientIDs: nil, on: connection, logger: logger).first
                else { throw RevokerStoreError(.database, "the deletion vanished") }
                return created ? .created(deletion) : .existing(deletion)
            }
        }
        if case .created(let deletion) = result {
            // Told to each app it covers; one that covered nothing changed nothing.
            let apps =
                deletion.clientIDs ?? Array(Set(deletion.grants.map(\Grant.clientID) + deletion.requests.map(\RevocationRequest.clientID))).sorted()
            for app in apps {
                queue.acknowledged.record(.init(.deletion, id: deletion.id, clientID: app, reference: deletion.accountReference))
            }
        }
        return result
    }

    /// Makes up to `limit` revocation requests for the held grants of live deletions that have
    /// none yet: a deletion makes its first batch as it is asked, and the workers make the rest
    /// here, so that a deletion of any size is accepted at once. Returns how many it made.
    public func fanOut(limit: Int = 500, actor: String, logger: Logger? = nil) async throws -> Int {
        try RevocationQueue.validateActor(actor)
        let logger = logger ?? self.logger
        guard (1...10_000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 10000") }
        return try await StoreDatabase.run(logger) {
            try await self.client.query("SELECT revoker.fan_out_deletions(\(limit)::int, \(actor))", logger: logger)
                .collect().first?.decode(Int.self) ?? 0
        }
    }

    /// The deletion with this id, or nil; its grants and requests only those of `clientIDs` when
    /// given (nil also when it covers none of them).
    public func deletion(id: UUID, clientIDs: [String]? = nil, logger: Logger? = nil) async throws -> AccountDeletion? {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await Self.deletions(where: "d.id", is: id, clientIDs: clientIDs, on: connection, logger: logger).first
            }
        }
    }

    /// An account's deletions, newest first; with `clientIDs`, those that cover any of them.
    public func ofAccount(
        _ accountReference: String,
        clientIDs: [String]? = nil,
        limit: Int = 100,
        logger: Logger? = nil
    ) async throws
        -> [AccountDeletion]
    {
        let logger = logger ?? self.logger
        guard (1...1000).contains(limit) else { throw RevokerStoreError(.invalidArgument, "limit must be between 1 and 1000") }
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                try await Self.deletions(
                    where: "d.account_reference",
                    is: accountReference,
                    clientIDs: clientIDs,
                    limit: limit,
                    on: connection,
                    logger: logger
                )
            }
        }
    }

    /// Deletions whose `column` (of `d`) is `value`, newest first, with their grants and requests
    /// (those of `clientIDs` only, when given).
    private static func deletions(
        where column: String,
        is value: some PostgresEncodable & Sendable,
        clientIDs: [String]?,
        limit: Int = 1,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> [AccountDeletion] {
        var binds = SQLBindings()
        let (matching, apps) = (try binds.bind(value), binds.bind(clientIDs))
        let rows = try await connection.query(
            binds.query(
                """
                SELECT d.id, d.account_reference, d.client_ids, d.state, d.outcome, d.requested_by, d.requested_at, d.completed_at
                FROM revoker.account_deletions d
                WHERE \(column) = \(matching) AND (\(apps)::text[] IS NULL OR d.client_ids && \(apps)::text[]
                    -- A deletion of every app is shown to a key limited to some only where it
                    -- touched their grants or requests: its part, never the rest.
                    OR (d.client_ids IS NULL
                        AND (EXISTS (SELECT 1 FROM revoker.grants g WHERE g.deletion_id = d.id AND g.client_id = ANY(\(apps)::text[]))
                             OR EXISTS (SELECT 1 FROM revoker.revocation_requests r
                                        WHERE r.deletion_id = d.id AND r.client_id = ANY(\(apps)::text[])))))
                ORDER BY d.requested_at DESC, d.id
                LIMIT \(limit)
                """
            ),
            logger: logger
        ).collect()
        var result: [AccountDeletion] = []
        for row in rows {
            let cells = row.makeRandomAccess()
            let id = try cells["id"].decode(UUID.self)
            guard let state = AccountDeletion.State(rawValue: try cells["state"].decode(String.self)) else {
                throw RevokerStoreError(.unexpectedData, "unknown deletion state in the database")
            }
            let grants = try await connection.query(
                """
                SELECT \(unescaped: GrantCustody.grantColumns) FROM revoker.grants g \(unescaped: GrantCustody.grantJoin)
                WHERE g.deletion_id = \(id) AND (\(clientIDs)::text[] IS NULL OR g.client_id = ANY(\(clientIDs)::text[]))
                ORDER BY g.created_at, g.id
                """,
                logger: logger
            ).collect().map(GrantCustody.decodeGrant)
            let requests = try await connection.query(
                """
                SELECT \(unescaped: RevocationQueue.requestColumns) FROM revoker.revocation_requests r
                WHERE r.deletion_id = \(id) AND (\(clientIDs)::text[] IS NULL OR r.client_id = ANY(\(clientIDs)::text[]))
                ORDER BY r.created_at, r.id
                """,
                logger: logger
            ).collect().map(RevocationQueue.decodeRequest)
            result.append(
                AccountDeletion(
                    id: id,
                    accountReference: try cells["account_reference"].decode(String.self),
                    clientIDs: try cells["client_ids"].decode([String]?.self),
                    state: state,
                    outcome: try cells["outcome"].decode(String?.self).flatMap(AccountDeletion.Outcome.init(rawValue:)),
                    requestedBy: try cells["requested_by"].decode(String.self),
                    requestedAt: try cells["requested_at"].decode(Date.self),
                    completedAt: try cells["completed_at"].decode(Date?.self),
                    grants: grants,
                    requests: requests
                )
            )
        }
        return result
    }

    /// `deletion` once it completed, or as it stands when `wait` runs out.
    public func settled(_ deletion: AccountDeletion, within wait: Duration, logger: Logger? = nil) async throws -> AccountDeletion {
        try await polling(
            deletion,
            within: wait,
            until: { $0.state == .completed },
            read: { try await self.deletion(id: deletion.id, logger: logger) }
        )
    }
}
