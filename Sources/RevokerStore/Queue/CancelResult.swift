import Foundation

/// Result of ``RevocationQueue/cancel(id:actor:)``.
public enum CancelResult: Sendable, Hashable {
    /// The request was pending and is now cancelled.
    case cancelled(RevocationRequest)
    /// The request exists but is not pending (running or final).
    case notCancellable(RevocationRequest)
    /// No request has this id.
    case notFound
}
