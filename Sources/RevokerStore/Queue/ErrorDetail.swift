/// An error as the store records it: on a request (its last error) or on a paused app (why it
/// is paused). Never holds a secret.
public struct ErrorDetail: Sendable, Hashable {
    /// Short machine-readable code, e.g. `invalid_grant`, `invalid_client` or `timeout`
    /// (stored up to 100 characters).
    public var code: String
    /// Human-readable description (stored up to 500 characters).
    public var description: String?

    /// Creates an error record.
    public init(code: String, description: String? = nil) {
        self.code = code
        self.description = description
    }
}
