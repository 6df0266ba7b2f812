/// Where a provider pushes signed messages about its users (Apple's server-to-server
/// notifications, Google's security event tokens): the routes it is reached at, how a body is
/// verified into a ``ProviderMessage``, and the answers in the provider's own shape.
///
/// The HTTP edge serves every inbox through one controller and the store keeps every message
/// through one inbox; neither knows which provider it is. The sender cannot send an API key:
/// the message's signature, verified completely, is its authentication.
public protocol ProviderInbox: Sendable {
    /// The paths under `/v1` it is reached at, e.g. `apple/notifications/{client_id}`: a
    /// `{client_id}` segment names the app the message must be for.
    var routes: [String] { get }
    /// Larger bodies are refused before verifying.
    var maximumBodyBytes: Int { get }
    /// The counter of what happened to each message (`result`: `accepted`, `duplicate`, or why it
    /// was refused), named as the provider's operators know it.
    var metricLabel: String { get }
    /// Whose messages they are, as the store and the audit trail record them.
    var source: ProviderMessageSource { get }
    /// Why messages are not received here (answered 404), or nil when they are. The routes
    /// exist either way, so that what the API serves does not depend on the configuration.
    var closedReason: String? { get }

    /// Verifies one body completely (signature by `kid`, the one allowed `alg`, `iss`, `aud`,
    /// times) and returns the message. `clientID` is the app the route named, if it named one.
    ///
    /// Throws ``InboxRefusal`` for a body that is malformed or does not verify, and anything else
    /// when the provider's keys cannot be fetched (the sender is then asked to try again).
    func receive(_ body: [UInt8], clientID: String?) async throws -> ProviderMessage

    /// The answer once the message is stored.
    func accepted(_ receipt: InboxReceipt) -> InboxAnswer

    /// The answer to a refusal in the provider's own error shape, or nil for the API's own
    /// (an RFC 9457 problem naming the field).
    func refused(_ refusal: InboxRefusal) -> InboxAnswer?
}

extension ProviderInbox {
    /// The provider whose messages these are.
    public var provider: ProviderName { source.provider }
}

/// What storing a message did, for its inbox's answer.
public struct InboxReceipt: Sendable, Hashable {
    /// The message had been stored before: nothing changed.
    public var duplicate: Bool
    /// The erasure request the message opened (``ProviderMessage/opensErasure``), the same for
    /// every receipt of the message.
    public var erasure: Erasure?

    /// An erasure request as the person reaches it.
    public struct Erasure: Sendable, Hashable {
        /// Its public code.
        public var code: String
        /// The absolute URL of its status page.
        public var statusURL: String

        public init(code: String, statusURL: String) {
            self.code = code
            self.statusURL = statusURL
        }
    }

    public init(duplicate: Bool, erasure: Erasure? = nil) {
        self.duplicate = duplicate
        self.erasure = erasure
    }
}

/// A body an inbox refuses: a bounded `code` for metrics and logs, and a sentence safe to show
/// the sender (never any of the token).
public struct InboxRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// A short snake_case word: a verification error code or `malformed_body`.
    public var code: String
    /// What is wrong.
    public var message: String
    /// The field to blame, when the body has fields.
    public var field: String?

    public init(code: String, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    /// A body that could not be read: broken framing, too large, not the expected shape.
    public static func malformedBody(_ message: String, field: String? = nil) -> Self {
        Self(code: "malformed_body", message: message, field: field)
    }

    public var description: String { message }
}

/// An HTTP answer in a provider's own shape, without the HTTP edge's types.
public struct InboxAnswer: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The body's media type, when there is a body.
    public var contentType: String?
    /// The body.
    public var body: [UInt8]

    public init(status: Int, contentType: String? = nil, body: [UInt8] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}
