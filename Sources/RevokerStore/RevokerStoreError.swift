/// An error from the store: database access, sealing, migrations and configuration parsing.
///
/// ``description`` is safe to show to a user: it never contains a credential, key material,
/// a password or SQL with values. ``debugDescription`` adds the underlying technical detail
/// (SQLSTATE and server message), still without secrets.
public struct RevokerStoreError: Error, CustomStringConvertible, CustomDebugStringConvertible, Sendable {
    /// What went wrong, as a stable code that can grow without breaking callers.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case conflict
            case notFound
            case invalidArgument
            case invalidDatabaseURL
            case invalidKeyring
            case unknownKeyID
            case unsealFailed
            case sealFailed
            case migrationChecksumMismatch
            case migrationFailed
            case unknownMigration
            case database
            case unexpectedData
            case livenessUnavailable
            case livenessLost
            case historyRewritten
        }

        private let base: Base

        private init(_ base: Base) { self.base = base }

        /// A live request with the same (client id, external reference) holds a different credential.
        public static let conflict = Self(.conflict)
        /// The request (or app) does not exist.
        public static let notFound = Self(.notFound)
        /// An argument was outside what the store accepts.
        public static let invalidArgument = Self(.invalidArgument)
        /// A `postgres://` URL could not be parsed.
        public static let invalidDatabaseURL = Self(.invalidDatabaseURL)
        /// Keyring material (`keyID=base64key` entries) is malformed.
        public static let invalidKeyring = Self(.invalidKeyring)
        /// A sealed credential names a key id that the keyring does not hold.
        public static let unknownKeyID = Self(.unknownKeyID)
        /// A sealed credential could not be opened: wrong key, tampered or moved ciphertext.
        public static let unsealFailed = Self(.unsealFailed)
        /// A credential could not be sealed.
        public static let sealFailed = Self(.sealFailed)
        /// An applied migration's file changed since it was applied.
        public static let migrationChecksumMismatch = Self(.migrationChecksumMismatch)
        /// A migration failed to apply.
        public static let migrationFailed = Self(.migrationFailed)
        /// The database records a migration this binary does not know (it is older than the schema).
        public static let unknownMigration = Self(.unknownMigration)
        /// The database reported an error or could not be reached.
        public static let database = Self(.database)
        /// The database returned data the store cannot interpret.
        public static let unexpectedData = Self(.unexpectedData)
        /// The database refused a worker's liveness lock or registration (a role without migration 0011's grants).
        public static let livenessUnavailable = Self(.livenessUnavailable)
        /// A worker's liveness lock is not held where its claim ran (its session died unnoticed,
        /// or a rescuer suspects it): it must take the lock again before it claims.
        public static let livenessLost = Self(.livenessLost)
        /// The audit trail no longer extends the checkpoints signed before: a signer refuses to sign it.
        public static let historyRewritten = Self(.historyRewritten)

        public var description: String { self.base.rawValue }
    }

    /// The error's code.
    public var code: Code
    /// A short, secret-free explanation.
    public var message: String
    /// Technical detail for logs (SQLSTATE, server message); never contains secrets.
    public var detail: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, detail: String? = nil) {
        self.code = code
        self.message = message
        self.detail = detail
    }

    public var description: String {
        "RevokerStoreError(\(self.code)): \(self.message)"
    }

    public var debugDescription: String {
        if let detail {
            return "RevokerStoreError(code: \(self.code), message: \(self.message), detail: \(detail))"
        }
        return "RevokerStoreError(code: \(self.code), message: \(self.message))"
    }
}
