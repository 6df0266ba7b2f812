import Foundation

/// A claim on a running request. Fenced operations apply only while its fencing token is
/// the request's current one.
public struct Lease: Sendable, Hashable {
    /// The claimed request.
    public var requestID: UUID
    /// The request's fencing token at claim time.
    public var fencingToken: Int64
    /// The worker that claimed it (also the actor of its audit events).
    public var owner: String
    /// Expiry as of the claim (extendLease moves it in the database only).
    public var expiresAt: Date

    /// Creates a lease value (normally returned by ``RevocationQueue/claim(batch:lease:owner:)``).
    public init(requestID: UUID, fencingToken: Int64, owner: String, expiresAt: Date) {
        self.requestID = requestID
        self.fencingToken = fencingToken
        self.owner = owner
        self.expiresAt = expiresAt
    }
}
