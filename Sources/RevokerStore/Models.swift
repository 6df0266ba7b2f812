import Foundation

/// Lifecycle state of a revocation request.
public struct RevocationState: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// Waiting to be claimed once `runAfter` has passed.
    public static let pending = Self("pending")
    /// Claimed by a worker under a lease.
    public static let running = Self("running")
    /// Final: the grant is revoked or was already invalid.
    public static let succeeded = Self("succeeded")
    /// Final: could not be revoked; see the outcome.
    public static let failed = Self("failed")
    /// Final: cancelled before it ran.
    public static let cancelled = Self("cancelled")
    /// All states.
    public static let all: [RevocationState] = [.pending, .running, .succeeded, .failed, .cancelled]

    /// Whether the state is final.
    public var isFinal: Bool { self != .pending && self != .running }
    public var description: String { self.rawValue }
}

/// Why a request reached its final state.
public struct RevocationOutcome: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// Apple accepted the revocation of a live token (state `succeeded`).
    public static let revoked = Self("revoked")
    /// The token was already invalid: nothing left to revoke (state `succeeded`).
    public static let alreadyInvalid = Self("already_invalid")
    /// Apple rejected the authorization code (expired, used, other client) (state `failed`).
    public static let codeRejected = Self("code_rejected")
    /// The id_token's subject differs from the enqueued Apple user id (state `failed`).
    public static let subjectMismatch = Self("subject_mismatch")
    /// Attempts ran out on transient errors (state `failed`).
    public static let exhausted = Self("exhausted")
    /// Our configuration for the app is wrong; the sealed credential is kept so the request
    /// can be requeued once fixed (state `failed`).
    public static let clientMisconfigured = Self("client_misconfigured")
    /// Apple rejected the request for another reason (state `failed`).
    public static let rejected = Self("rejected")
    /// Cancelled by an operator (state `cancelled`).
    public static let cancelled = Self("cancelled")
    /// All outcomes.
    public static let all: [RevocationOutcome] = [
        .revoked, .alreadyInvalid, .codeRejected, .subjectMismatch, .exhausted, .clientMisconfigured, .rejected, .cancelled,
    ]

    /// The final state this outcome belongs to.
    public var state: RevocationState {
        switch self {
        case .revoked, .alreadyInvalid: .succeeded
        case .cancelled: .cancelled
        default: .failed
        }
    }
    public var description: String { self.rawValue }
}

/// A request to revoke an Apple grant, as handed to ``RevocationQueue/enqueue(_:actor:)``.
public struct NewRevocation: Sendable, CustomStringConvertible {
    /// The app's Services ID / bundle id used as `client_id` with Apple.
    public var clientID: String
    /// The caller's reference (e.g. its user id); idempotency key together with `clientID`.
    public var externalReference: String
    /// Apple's user id (`sub`), when known; a mismatching id_token then stops the request.
    public var appleUserID: String?
    /// The credential to revoke.
    public var credential: Credential
    /// The redirect URI an authorization code was issued for, if any.
    public var redirectURI: String?
    /// Attempts before the request fails as `exhausted`.
    public var maxAttempts: Int

    /// Creates a new revocation.
    public init(
        clientID: String,
        externalReference: String,
        appleUserID: String? = nil,
        credential: Credential,
        redirectURI: String? = nil,
        maxAttempts: Int = 8
    ) {
        self.clientID = clientID
        self.externalReference = externalReference
        self.appleUserID = appleUserID
        self.credential = credential
        self.redirectURI = redirectURI
        self.maxAttempts = maxAttempts
    }

    public var description: String {
        "NewRevocation(clientID: \(self.clientID), externalReference: \(self.externalReference), kind: \(self.credential.kind))"
    }
}

/// A stored revocation request (without its credential).
public struct RevocationRequest: Sendable, Hashable, Identifiable {
    /// Request id.
    public var id: UUID
    /// The app's `client_id`.
    public var clientID: String
    /// The enqueuer's reference.
    public var externalReference: String
    /// Apple's user id (`sub`), when given.
    public var appleUserID: String?
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
    /// Last error code recorded (Apple `error` or an internal code).
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
}

/// Result of ``RevocationQueue/enqueue(_:actor:)``.
public enum EnqueueResult: Sendable, Hashable {
    /// A new request was created.
    case created(RevocationRequest)
    /// A live request for the same (client id, external reference) and credential exists.
    case existing(RevocationRequest)

    /// The request, new or existing.
    public var request: RevocationRequest {
        switch self {
        case .created(let request), .existing(let request): request
        }
    }
}

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

/// A claimed request with its opened credential.
public struct ClaimedRevocation: Sendable, CustomStringConvertible {
    /// The request as claimed (state `running`).
    public var request: RevocationRequest
    /// The opened credential. Never log it (its description is redacted).
    public var credential: Credential
    /// The lease for fenced operations.
    public var lease: Lease

    public var description: String {
        "ClaimedRevocation(id: \(self.request.id), kind: \(self.credential.kind), fencingToken: \(self.lease.fencingToken))"
    }
}

/// The last error recorded on a request (an Apple error code or an internal one).
public struct RevocationError: Sendable, Hashable {
    /// Short machine-readable code, e.g. `invalid_grant` or `timeout` (max 100 characters).
    public var code: String
    /// Human-readable description, no secrets (truncated to 500 characters).
    public var description: String?

    /// Creates an error record.
    public init(code: String, description: String? = nil) {
        self.code = code
        self.description = description
    }
}

/// Why an app is paused.
public struct AppPauseReason: Sendable, Hashable {
    /// Short code, e.g. `invalid_client`.
    public var code: String
    /// Description without secrets.
    public var description: String?

    /// Creates a reason.
    public init(code: String, description: String? = nil) {
        self.code = code
        self.description = description
    }
}

/// An app whose requests are not claimed because of a configuration fault.
public struct AppPause: Sendable, Hashable {
    /// The paused app.
    public var clientID: String
    /// Why.
    public var reason: AppPauseReason
    /// Since when.
    public var pausedAt: Date
    /// When the worker should try a single request again to see if the fault is fixed.
    public var nextProbeAt: Date
}

/// Result of ``RevocationQueue/requeueConfigurationFailure(id:actor:)``.
public enum RequeueResult: Sendable, Hashable {
    /// The new pending request that took over the credential.
    case requeued(RevocationRequest)
    case notFound
    /// The request did not fail on a configuration fault, or holds no credential any more.
    case notRequeueable(RevocationRequest)
}

/// Result of ``RevocationQueue/cancel(id:actor:)``.
public enum CancelResult: Sendable, Hashable {
    /// The request was pending and is now cancelled.
    case cancelled(RevocationRequest)
    /// The request exists but is not pending (running or final).
    case notCancellable(RevocationRequest)
    /// No request has this id.
    case notFound
}

/// Counts for metrics and health.
public struct QueueStatistics: Sendable, Hashable {
    /// Requests by state.
    public var byState: [RevocationState: Int]
    /// Final requests by (state, outcome).
    public var byOutcome: [Outcome: Int]
    /// Age of the oldest due pending request (zero when none is due).
    public var oldestDueAge: Duration
    /// Number of paused apps.
    public var pausedApps: Int
    /// Credentials waiting in the SQL intake (plaintext at rest until sealed).
    public var unsealedIntake: Int

    /// A (state, outcome) pair.
    public struct Outcome: Sendable, Hashable {
        /// Final state.
        public var state: RevocationState
        /// Outcome.
        public var outcome: RevocationOutcome

        /// Creates a pair.
        public init(state: RevocationState, outcome: RevocationOutcome) {
            self.state = state
            self.outcome = outcome
        }
    }
}

/// Filter for ``RevocationQueue/list(_:)``.
public struct RevocationFilter: Sendable, Hashable {
    /// Only this app.
    public var clientID: String?
    /// Only this external reference.
    public var externalReference: String?
    /// Only this Apple user id.
    public var appleUserID: String?
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
        appleUserID: String? = nil,
        state: RevocationState? = nil,
        createdBefore: Date? = nil,
        limit: Int = 100
    ) {
        self.clientID = clientID
        self.externalReference = externalReference
        self.appleUserID = appleUserID
        self.state = state
        self.createdBefore = createdBefore
        self.limit = limit
    }
}
