import Foundation
import Logging
import PostgresNIO

extension RevocationQueue {
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
        try await AuditWriter.write(
            [AuditEvent(.credentialSealed, detail: "sealed from SQL intake")],
            requestID: id,
            actor: "worker",
            on: connection,
            logger: self.logger
        )
    }
}
