import Foundation

/// Result of ``RevocationQueue/requeueConfigurationFailure(id:actor:)``.
public enum RequeueResult: Sendable, Hashable {
    /// The new pending request that took over the credential.
    case requeued(RevocationRequest)
    case notFound
    /// The request did not fail on a configuration fault, or holds no credential any more.
    case notRequeueable(RevocationRequest)
}
