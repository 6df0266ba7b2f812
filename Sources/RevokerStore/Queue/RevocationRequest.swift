import Foundation
import RevokerProvider

/// A stored revocation request (without its credential).
public struct RevocationRequest: Sendable, Hashable, Identifiable {
    /// Request id.
    public var id: UUID
    /// The sign-in provider that issued the grant (`apple`, `google`).
    public var provider: String
    /// The app's `client_id` at its provider.
    public var clientID: String
    /// The enqueuer's reference.
    public var externalReference: String
    /// The user's id at the provider (`sub`), when given.
    public var userID: String?
    /// The kind of the stored credential (becomes `refresh_token` after a code exchange).
    public var credentialKind: CredentialKind
    /// The kind that was enqueued.
    public var enqueuedKind: CredentialKind
    /// Whether a credential is still stored (sealed or in intake).
    public var hasCredential: Bool
    /// Redirect URI the code was issued for, if any.
    public var redirectURI: String?
    /// Current state.
    public var state: RevocationState
    /// Outcome, once final.
    public var outcome: RevocationOutcome?
    /// Attempts started so far (claims, minus those given back).
    public var attempts: Int
    /// Attempts allowed before `exhausted`.
    public var maxAttempts: Int
    /// Not claimed before this time.
    public var runAfter: Date
    /// Worker holding the lease, while running.
    public var leaseOwner: String?
    /// Lease expiry, while running.
    public var leaseExpiresAt: Date?
    /// Incremented on every claim; fenced operations compare it.
    public var fencingToken: Int64
    /// Last error code recorded (the provider's `error` or an internal code).
    public var lastErrorCode: String?
    /// Last error description recorded (no secrets).
    public var lastErrorDescription: String?
    /// The failed request this one was requeued from, if any.
    public var requeuedFrom: UUID?
    /// Creation time (database clock).
    public var createdAt: Date
    /// Last change (database clock).
    public var updatedAt: Date
    /// When it became final.
    public var finishedAt: Date?
    /// What the request does with its grant: revoke it, or take it into custody.
    public var purpose: RequestPurpose = .revoke
    /// The held grant the request works on (custody), if any.
    public var grantID: UUID? = nil
    /// The account deletion the request belongs to, if any.
    public var deletionID: UUID? = nil
    /// The span that asked for it (W3C `traceparent`): the worker's attempt continues its trace.
    public var traceParent: TraceParent? = nil
}

/// What a request does with the grant it carries.
public enum RequestPurpose: String, Sendable, Hashable, Codable {
    /// Prove it and revoke it.
    case revoke
    /// Exchange its code (or take its refresh token) and hold the refresh token in custody.
    case hold
    /// Prove a held grant's refresh token still live, revoking nothing (a periodic validation).
    case validate
}
