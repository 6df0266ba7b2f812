import Foundation

/// The kind of an audit event (checked by the database).
public struct AuditEventKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// The kind a provider's plug-in names for its messages: a plain lower-case name (the
    /// database's check of the kinds has the last word).
    public init?(providerMessages name: String) {
        guard let first = name.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), name.utf8.count <= 63,
            name.utf8.allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        self.rawValue = name
    }

    /// The kinds a filter may name: ``all`` and the kinds providers' plug-ins name for their
    /// messages.
    public static func known(adding providerKinds: [String]) -> [AuditEventKind] {
        var known = all
        for kind in providerKinds.compactMap(Self.init(providerMessages:)) where !known.contains(kind) { known.append(kind) }
        return known
    }

    /// `enqueued`.
    public static let enqueued = Self("enqueued")
    /// `claimed`.
    public static let claimed = Self("claimed")
    /// `token_exchanged`.
    public static let tokenExchanged = Self("token_exchanged")
    /// `token_validated`.
    public static let tokenValidated = Self("token_validated")
    /// `id_token_verified`.
    public static let idTokenVerified = Self("id_token_verified")
    /// `id_token_mismatch`.
    public static let idTokenMismatch = Self("id_token_mismatch")
    /// `revoked`.
    public static let revoked = Self("revoked")
    /// `retry_scheduled`.
    public static let retryScheduled = Self("retry_scheduled")
    /// `rescued`.
    public static let rescued = Self("rescued")
    /// `released`.
    public static let released = Self("released")
    /// `failed`.
    public static let failed = Self("failed")
    /// `succeeded`.
    public static let succeeded = Self("succeeded")
    /// `cancelled`.
    public static let cancelled = Self("cancelled")
    /// `credential_erased`.
    public static let credentialErased = Self("credential_erased")
    /// `credential_sealed`.
    public static let credentialSealed = Self("credential_sealed")
    /// `requeued`.
    public static let requeued = Self("requeued")
    /// `app_paused`.
    public static let appPaused = Self("app_paused")
    /// `app_resumed`.
    public static let appResumed = Self("app_resumed")
    /// A provider's error answer worth recording on its own (stored as `apple_error`, the
    /// name it had before there were other providers).
    public static let providerError = Self("apple_error")
    /// A provider's message, accepted (about an app's user, or the request it ended). A
    /// provider's plug-in may name the kind its messages had before this one was for all
    /// (``init(providerMessages:)``).
    public static let providerMessage = Self("provider_message")
    /// A code exchange is about to be sent: if the attempt dies before its result is stored, a
    /// later refusal of the code may be Revoker's own doing.
    public static let exchangeStarted = Self("exchange_started")
    /// A signer refused to take a checkpoint: the trail no longer extends what was signed before
    /// (detail: the reason's code, then what it found).
    public static let checkpointRefused = Self("checkpoint_refused")
    /// A grant was registered for custody (detail: the grant's id, provider, kind, and how the
    /// user is known).
    public static let grantRegistered = Self("grant_registered")
    /// A grant's refresh token is sealed in custody (detail: the grant's id).
    public static let grantHeld = Self("grant_held")
    /// An account's deletion was asked (its own chain, keyed by the deletion's id; detail: the
    /// apps it covers and how many grants).
    public static let deletionRequested = Self("deletion_requested")
    /// A deletion asked for a grant's revocation (detail: the grant, provider and request).
    public static let deletionGrant = Self("deletion_grant")
    /// A deletion's grant as the deletion ended (detail: the grant, its state and outcome).
    public static let grantEnded = Self("grant_ended")
    /// An account's deletion ended (detail: its outcome and how many grants and requests it covered).
    public static let deletionCompleted = Self("deletion_completed")
    /// A write this process had acknowledged was missing after the database failed over
    /// (detail: what, its id, when it was acknowledged and the timelines).
    public static let writeLost = Self("write_lost")
    /// A free-form note (detail says what).
    public static let note = Self("note")

    /// All kinds.
    public static let all: [AuditEventKind] = [
        .enqueued, .claimed, .tokenExchanged, .tokenValidated, .idTokenVerified, .idTokenMismatch, .revoked,
        .retryScheduled, .rescued, .released, .failed, .succeeded, .cancelled, .credentialErased, .credentialSealed,
        .requeued, .appPaused, .appResumed, .providerError, .exchangeStarted, .note, .providerMessage, .checkpointRefused,
        .grantRegistered, .grantHeld, .deletionRequested, .deletionGrant, .grantEnded, .deletionCompleted, .writeLost,
    ]
    public var description: String { self.rawValue }
}
