/// Why Revoker could not start. ``description`` is one line for a person; it never holds a
/// password, key or token.
public struct RevokerAppError: Error, Sendable, CustomStringConvertible {
    /// What kind of problem; codes can grow without breaking callers.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case configuration, databaseUnreachable, schemaNotCurrent, database, shutdownCutShort, cannotListen
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A setting, or an app's key, is unusable.
        public static let configuration = Code(.configuration)
        /// The database did not answer in time.
        public static let databaseUnreachable = Code(.databaseUnreachable)
        /// Migrations are pending.
        public static let schemaNotCurrent = Code(.schemaNotCurrent)
        /// The database answered with an error.
        public static let database = Code(.database)
        /// A graceful shutdown ran past its limit and what was left was cancelled.
        public static let shutdownCutShort = Code(.shutdownCutShort)
        /// The API cannot listen on its address (in use, not this machine's, or privileged).
        public static let cannotListen = Code(.cannotListen)

        public var description: String { base.rawValue }
    }

    /// What kind of problem.
    public let code: Code
    /// What is wrong and what to do, for a person.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
