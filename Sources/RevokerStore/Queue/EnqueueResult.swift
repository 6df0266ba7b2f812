import Foundation

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
