import Foundation

/// Filter for ``RevocationQueue/list(_:)``.
public struct RevocationFilter: Sendable, Hashable {
    /// Only this provider's requests.
    public var provider: String?
    /// Only this app.
    public var clientID: String?
    /// Only these apps (an API key's limit), when set.
    public var clientIDs: [String]?
    /// Only this external reference.
    public var externalReference: String?
    /// Only this user id (at the request's provider).
    public var userID: String?
    /// Only this state.
    public var state: RevocationState?
    /// Only requests created strictly before this (for paging back in time).
    public var createdBefore: Date?
    /// At most this many (1...1000), newest first.
    public var limit: Int

    /// Creates a filter.
    public init(
        clientID: String? = nil,
        externalReference: String? = nil,
        userID: String? = nil,
        state: RevocationState? = nil,
        createdBefore: Date? = nil,
        limit: Int = 100,
        provider: String? = nil
    ) {
        self.provider = provider
        self.clientID = clientID
        self.externalReference = externalReference
        self.userID = userID
        self.state = state
        self.createdBefore = createdBefore
        self.limit = limit
    }
}
