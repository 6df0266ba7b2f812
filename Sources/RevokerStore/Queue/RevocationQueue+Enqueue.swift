import Foundation
import Logging
import PostgresNIO
import RevokerProvider

extension RevocationQueue {
    /// Enqueues a revocation. A replay for a live request with the same credential returns
    /// `.existing`; a different credential or kind throws ``RevokerStoreError/Code/conflict``.
    /// `new` was checked when it was made (``NewRevocation``). `traceParent` is stored with it,
    /// for the worker's attempt to continue that trace.
    public func enqueue(_ new: NewRevocation, actor: String, traceParent: TraceParent? = nil, logger: Logger? = nil) async throws -> EnqueueResult {
        try Self.validateActor(actor)
        let digest = new.credential.digest
        var logger = logger ?? self.logger
        logger[metadataKey: "revoker.client_id"] = "\(new.clientID)"

        for _ in 0..<10 {
            let id = UUID()
            let sealed = try self.sealer.seal(new.credential, requestID: id)
            let result: EnqueueResult? = try await StoreDatabase.run(logger) {
                try await self.transaction(logger: logger) { connection in
                    if let row = try await Self.insert(
                        new,
                        id: id,
                        sealed: sealed,
                        actor: actor,
                        traceParent: traceParent,
                        on: connection,
                        logger: logger
                    ) {
                        return .created(try Self.decodeRequest(row))
                    }
                    let existing = try await connection.query(
                        """
                        SELECT \(unescaped: Self.requestColumns), r.credential_digest
                        FROM revoker.revocation_requests r
                        WHERE r.client_id = \(new.clientID) AND r.external_reference = \(new.externalReference)
                          AND r.state IN ('pending', 'running') AND r.grant_id IS NULL
                        """,
                        logger: logger
                    ).collect()
                    guard let row = existing.first else { return nil }
                    let request = try Self.decodeRequest(row)
                    let storedDigest = Array(try row.makeRandomAccess()["credential_digest"].decode(ByteBuffer.self).readableBytesView)
                    guard storedDigest == digest, request.enqueuedKind == new.credential.kind, request.provider == new.provider else {
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
                    acknowledged.record(.init(.request, id: request.id, clientID: request.clientID, reference: request.externalReference))
                    logger.debug("Enqueued revocation request", metadata: ["revoker.request.id": "\(request.id)"])
                }
                return result
            }
            // The live request finished between INSERT and SELECT: try again.
        }
        throw RevokerStoreError(.database, "could not enqueue: the live request kept changing")
    }

    /// Inserts a new request with its `enqueued` audit row; nil when a live request without a
    /// grant holds the same (client id, external reference).
    static func insert(
        _ new: NewRevocation,
        id: UUID,
        sealed: SealedCredential,
        deletionID: UUID? = nil,
        actor: String,
        traceParent: TraceParent? = nil,
        on connection: PostgresConnection,
        logger: Logger
    ) async throws -> PostgresRow? {
        let inserted = try await connection.query(
            """
            INSERT INTO revoker.revocation_requests AS r
                (id, provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
                 sealed_credential, credential_key_id, credential_digest, redirect_uri, max_attempts, deletion_id, trace_parent)
            VALUES (\(id), \(new.provider), \(new.clientID), \(new.externalReference), \(new.userID),
                    \(new.credential.kind.rawValue), \(new.credential.kind.rawValue), \(ByteBuffer(bytes: sealed.bytes)),
                    \(sealed.keyID), \(ByteBuffer(bytes: new.credential.digest)), \(new.redirectURI), \(new.maxAttempts), \(deletionID),
                    \(traceParent?.rawValue))
            ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') AND grant_id IS NULL DO NOTHING
            RETURNING \(unescaped: Self.requestColumns)
            """,
            logger: logger
        ).collect()
        guard let row = inserted.first else { return nil }
        let detail = new.enqueuedDetail + (deletionID.map { " deletion=\($0.uuidString.lowercased())" } ?? "")
        try await AuditWriter.write([AuditEvent(.enqueued, detail: detail)], requestID: id, actor: actor, on: connection, logger: logger)
        return row
    }
}
