import Foundation

/// The deletion of an account by its reference: every grant held for it revoked, with an
/// outcome of its own.
public struct AccountDeletion: Sendable, Hashable, Identifiable {
    public var id: UUID
    /// The app's own reference for the account.
    public var accountReference: String
    /// The apps it covers (sorted); nil: every app.
    public var clientIDs: [String]?
    public var state: State
    /// Set once it completed.
    public var outcome: Outcome?
    /// Who asked (`api:<key>`, `cli:<user>`, `sql:<role>`).
    public var requestedBy: String
    public var requestedAt: Date
    public var completedAt: Date?
    /// The grants it covers (live when it was asked), oldest first; only those of the apps
    /// the reader may see.
    public var grants: [Grant]
    /// Its requests: one per held grant, and the one for a credential it carried.
    public var requests: [RevocationRequest]

    /// Where a deletion stands.
    public enum State: String, Sendable, Hashable, Codable {
        /// Some grant or request is still in flight.
        case pending
        /// Every grant and request it covers has ended.
        case completed
    }

    /// How a deletion ended.
    public enum Outcome: String, Sendable, Hashable, Codable {
        /// Every grant it covered ended (revoked, found dead, or never taken in), and its
        /// credential's request succeeded.
        case revoked
        /// No grant was held for the account, and it carried no credential.
        case nothingHeld = "nothing_held"
        /// A grant is still held (its revocation failed: asking again retries it), or the
        /// request of the credential it carried failed.
        case incomplete
    }

    /// What became of one grant, as far as this deletion is concerned: its end (`revoked`, or
    /// why it died or was never held), or its revocation's outcome when it is still held.
    public func outcome(of grant: Grant) -> String? {
        Self.outcome(of: grant) { id in requests.first { $0.id == id }?.outcome?.rawValue }
    }

    /// ``outcome(of:)`` of every grant, in their order, in one pass over the requests (an
    /// account of 10,000 grants would otherwise search its requests 10,000 times).
    public var grantOutcomes: [String?] {
        let byRequest = Dictionary(requests.map { ($0.id, $0.outcome?.rawValue) }, uniquingKeysWith: { first, _ in first })
        return grants.map { grant in Self.outcome(of: grant) { byRequest[$0] ?? nil } }
    }

    private static func outcome(of grant: Grant, revocationOutcome: (UUID) -> String?) -> String? {
        if let reason = grant.endReason { return reason }
        return grant.revokeRequestID.flatMap(revocationOutcome)
    }
}

/// Result of ``RevocationQueue/requestDeletion(accountReference:clientIDs:credential:actor:logger:)``.
public enum DeletionResult: Sendable, Hashable {
    /// A new deletion was recorded.
    case created(AccountDeletion)
    /// A deletion of the account covering the same apps was already under way.
    case existing(AccountDeletion)

    public var deletion: AccountDeletion {
        switch self {
        case .created(let deletion), .existing(let deletion): deletion
        }
    }
}
