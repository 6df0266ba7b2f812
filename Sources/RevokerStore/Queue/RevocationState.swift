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
