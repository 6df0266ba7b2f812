import Foundation

/// A grant held in custody (without its token): whose it is, for which account, and where it stands.
public struct Grant: Sendable, Hashable, Identifiable {
    public var id: UUID
    /// The sign-in provider that issued it (`apple`, `google`).
    public var provider: String
    /// The app's `client_id` at its provider.
    public var clientID: String
    /// The app's own reference for the account it belongs to.
    public var accountReference: String
    /// The user's id at the provider (`sub`), when known.
    public var userID: String?
    /// How ``userID`` is known.
    public var userSource: UserSource?
    /// What was registered: an authorization code, a refresh, access or identity token.
    public var registeredKind: CredentialKind
    public var state: GrantState
    /// Why it ended: the request outcome that ended it, or the provider's message.
    public var endReason: String?
    /// The request that took it into custody.
    public var holdRequestID: UUID?
    /// The request revoking it, once a deletion asked.
    public var revokeRequestID: UUID?
    /// The account deletion that covers it, once one asked.
    public var deletionID: UUID?
    public var createdAt: Date
    public var updatedAt: Date
    /// When its token was sealed here.
    public var heldAt: Date?
    public var endedAt: Date?
    /// When a periodic validation last ended on it (`custody.validate_every_days`).
    public var validatedAt: Date?
    /// The last error of the request that took it in, when that request failed.
    public var error: ErrorDetail?

    /// How a grant's user is known.
    public enum UserSource: String, Sendable, Hashable, Codable {
        /// Proven: the `sub` of the identity token in the provider's own answer to Revoker's
        /// exchange or validation of this grant, verified completely.
        case verifiedIDToken = "verified_id_token"
        /// As the app stated it (a user id, or the `sub` of an identity token it passed on, which
        /// proves who signed in but not whose token this is); the provider's answer is checked
        /// against it. A message naming this user does not erase the grant unheard: it is revoked.
        case stated
    }
}

/// Where a held grant stands.
public enum GrantState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Registered; its code is being exchanged, or its token validated, at the provider.
    case pending
    /// Its refresh token is sealed in custody.
    case held
    /// A deletion's revocation request is working on it.
    case revoking
    /// Revoked by a deletion.
    case revoked
    /// The provider says it is gone: nothing left to revoke.
    case dead
    /// Never held: the code was refused, lost, another user's, or attempts ran out.
    case failed

    /// Whether the grant is still live in custody (pending, held or revoking).
    public var isLive: Bool { self == .pending || self == .held || self == .revoking }
}
