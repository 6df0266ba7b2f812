import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
    /// Seals every credential waiting in the SQL intake (call on every worker wake-up);
    /// returns how many were sealed.
    @discardableResult
    public func sealIntake(batch: Int = 500, logger: Logger? = nil) async throws -> Int {
        let logger = logger ?? self.logger
        var total = 0
        while true {
            let (read, sealed): (Int, Int) = try await StoreDatabase.run(logger) {
                try await self.client.withTransaction(logger: logger) { connection in
                    let rows = try await connection.query(
                        """
                        SELECT i.request_id, i.credential, i.key_id, i.sealed, r.credential_kind
                        FROM revoker.credential_intake i JOIN revoker.revocation_requests r ON r.id = i.request_id
                        ORDER BY i.created_at
                        LIMIT \(batch)
                        FOR UPDATE OF i, r SKIP LOCKED
                        """,
                        logger: logger
                    ).collect()
                    var opened = 0
                    for row in rows {
                        let (id, plaintext, keyID, sealed, rawKind) = try row.decode((UUID, String?, String?, ByteBuffer?, String).self)
                        guard let kind = CredentialKind(rawValue: rawKind),
                            let intake = IntakeRow(credential: plaintext, keyID: keyID, sealed: sealed)
                        else {
                            throw RevokerStoreError(.unexpectedData, "unknown credential kind or an empty intake row in the database")
                        }
                        let credential: Credential
                        do {
                            credential = try self.open(intake, kind: kind)
                        } catch let error as RevokerStoreError {
                            // Left for the claim, which defers the request and says why.
                            logger.error(
                                "Intake credential cannot be opened",
                                metadata: ["revoker.request.id": "\(id)", "revoker.error": "\(error.code)"]
                            )
                            continue
                        }
                        try await self.sealIntakeRow(id: id, credential: credential, on: connection)
                        opened += 1
                    }
                    return (rows.count, opened)
                }
            }
            total += sealed
            // A row no key opens stays; a batch of only such rows must not loop.
            if read < batch || sealed == 0 { break }
        }
        if total > 0 {
            logger.debug("Sealed intake credentials", metadata: ["revoker.count": "\(total)"])
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
        try await AuditWriter.write(
            [AuditEvent(.credentialSealed, detail: "sealed from SQL intake")],
            requestID: id,
            actor: "worker",
            on: connection,
            logger: self.logger
        )
    }
}

/// A credential waiting in the SQL intake: plaintext (written before migration 0003) or
/// encrypted by `revoker.enqueue_revocation` to an intake key.
struct IntakeRow {
    enum Form {
        case plaintext(String)
        case encrypted(keyID: String, message: [UInt8])
    }

    let form: Form

    /// Nil when the row holds neither form (the table's check forbids it).
    init?(credential: String?, keyID: String?, sealed: ByteBuffer?) {
        if let sealed, let keyID {
            form = .encrypted(keyID: keyID, message: Array(sealed.readableBytesView))
        } else if let credential {
            form = .plaintext(credential)
        } else {
            return nil
        }
    }
}

extension RevocationQueue {
    func open(_ intake: IntakeRow, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        switch intake.form {
        case .plaintext(let secret): return Credential(kind: kind, secret: secret)
        case .encrypted(let keyID, let message): return try sealer.openIntake(message, keyID: keyID, kind: kind)
        }
    }

    /// ``publishSQLIntake(apps:logger:)`` with `clientIDs` all of the default provider's.
    public func publishSQLIntake(clientIDs: some Collection<String>, logger: Logger? = nil) async throws {
        try await publishSQLIntake(apps: [NewRevocation.defaultProvider: Set(clientIDs)], logger: logger)
    }

    /// Makes the SQL path match this process's configuration: `apps` (client_ids by provider)
    /// become the apps `revoker.enqueue_revocation` and `revoker.register_grant` accept (others
    /// are removed; none given changes nothing), and the intake keys' public halves are
    /// published, the last as the one to encrypt to.
    public func publishSQLIntake(apps byProvider: [String: Set<String>], logger: Logger? = nil) async throws {
        let logger = logger ?? self.logger
        let pairs = byProvider.flatMap { provider, clientIDs in clientIDs.map { ($0, provider) } }.sorted { $0.0 < $1.0 }
        let (apps, providers) = (pairs.map(\.0), pairs.map(\.1))
        let keys = sealer.intakeKeys
        try await StoreDatabase.run(logger) {
            try await self.client.withTransaction(logger: logger) { connection in
                // A process configured without apps (`migrate` with a database URL alone) leaves the list as it is.
                if !apps.isEmpty {
                    // Deleted and inserted, never updated: the service's role may do only those two.
                    try await connection.run(
                        """
                        DELETE FROM revoker.apps a
                        WHERE NOT EXISTS (
                            SELECT 1 FROM unnest(\(apps)::text[], \(providers)::text[]) AS c(client_id, provider)
                            WHERE c.client_id = a.client_id AND c.provider IS NOT DISTINCT FROM a.provider
                        )
                        """,
                        logger: logger
                    )
                    try await connection.run(
                        """
                        INSERT INTO revoker.apps (client_id, provider) SELECT * FROM unnest(\(apps)::text[], \(providers)::text[])
                        ON CONFLICT (client_id) DO NOTHING
                        """,
                        logger: logger
                    )
                }
                guard let current = keys.last else { return }
                try await connection.run(
                    "UPDATE revoker.intake_keys SET is_current = false WHERE is_current AND key_id <> \(current.id)",
                    logger: logger
                )
                for key in keys {
                    try await connection.run(
                        """
                        INSERT INTO revoker.intake_keys (key_id, public_key, is_current)
                        VALUES (\(key.id), \(ByteBuffer(bytes: key.openPGPPublicKey)), \(key.id == current.id))
                        ON CONFLICT (key_id) DO UPDATE SET is_current = EXCLUDED.is_current
                        """,
                        logger: logger
                    )
                }
            }
        }
    }
}
