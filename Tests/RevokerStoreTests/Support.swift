import Crypto
import Foundation
import Logging
import PostgresNIO
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting

enum Fixtures {
    static let keyA = "a=" + Data(repeating: 0x11, count: 32).base64EncodedString()
    static let keyB = "b=" + Data(repeating: 0x22, count: 32).base64EncodedString()

    static func sealer(_ text: String = keyA, current: String? = nil) throws -> CredentialSealer {
        CredentialSealer(keyring: try CredentialKeyring(parsing: text, currentKeyID: current))
    }

    /// The test stack's migrated database, and a queue on it sealing with `sealer` (default: key `a`).
    static func withQueue<R: Sendable>(
        logger: Logger = Logger(label: "test"),
        sealer: CredentialSealer? = nil,
        _ body: (ScratchDatabase, RevocationQueue) async throws -> R
    ) async throws -> R {
        try await RevokerTestStack.with(apps: [.apple: ["com.example.app"]]) { stack in
            // The stack's intake key opens what the SQL function encrypted.
            let keyring = try (sealer ?? self.sealer()).keyring
            let queue = RevocationQueue(
                client: stack.database.client,
                sealer: CredentialSealer(keyring: keyring, intakeKeys: stack.configuration.intakeKeys),
                logger: logger
            )
            return try await body(stack.database, queue)
        }
    }

    /// Enqueues `count` requests through the SQL function and claims them all for worker "w".
    static func enqueueAndClaim(_ count: Int, db: ScratchDatabase, queue: RevocationQueue) async throws -> [ClaimedRevocation] {
        _ = try await db.client.query(
            "SELECT revoker.enqueue_revocation('com.example.app', 'ref-' || g, 'refresh_token', 'tok-' || g) FROM generate_series(1, \(count)) g"
        ).collect()
        return try await queue.claim(batch: count, lease: .seconds(60), owner: "w")
    }

    static func new(
        _ reference: String,
        secret: String = "r.secret-token",
        kind: CredentialKind = .refreshToken,
        client: String = "com.example.app"
    ) throws -> NewRevocation {
        try NewRevocation(
            clientID: client,
            externalReference: reference,
            userID: "000123.abc",
            credential: Credential(kind: kind, secret: secret)
        )
    }
}
