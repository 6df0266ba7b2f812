/// A setting that is missing or wrong. The message says what, and where to set it; it never
/// contains a key, token or password.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// What is wrong and where to fix it.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
