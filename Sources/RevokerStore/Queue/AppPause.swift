import Foundation

/// An app whose requests are not claimed because of a configuration fault.
public struct AppPause: Sendable, Hashable {
    /// The paused app.
    public var clientID: String
    /// Why.
    public var reason: ErrorDetail
    /// Since when.
    public var pausedAt: Date
    /// When the worker should try a single request again to see if the fault is fixed.
    public var nextProbeAt: Date
}
