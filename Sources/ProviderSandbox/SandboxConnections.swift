import Hummingbird
import NIOCore
import Synchronization

/// How clients reach the sandbox: connections that carried a call, how many were open at once,
/// and how many calls came over HTTP/2 streams. A worker over HTTP/2 needs a handful of
/// connections where HTTP/1.1 needs one per call in flight; this is what shows it.
public struct SandboxConnectionReport: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey {
        case opened
        case open
        case peakOpen = "peak_open"
        case http2Calls = "http2_calls"
        case http1Calls = "http1_calls"
        case peakCallsInFlight = "peak_calls_in_flight"
    }
    /// Connections that carried at least one call.
    public var opened: Int
    /// Those still open.
    public var open: Int
    /// The most open at one time.
    public var peakOpen: Int
    public var http2Calls: Int
    public var http1Calls: Int
    /// The most calls being answered at one time.
    public var peakCallsInFlight: Int
}

/// Counts connections as calls arrive on them, each once, until it closes, and the calls being answered.
package final class SandboxConnections: Sendable {
    private struct State {
        var open: Set<ObjectIdentifier> = []
        var inFlight = 0
        var report = SandboxConnectionReport(opened: 0, open: 0, peakOpen: 0, http2Calls: 0, http1Calls: 0, peakCallsInFlight: 0)
    }
    private let state = Mutex(State())

    package init() {}

    /// Records a call that arrived on `channel`: an HTTP/2 stream's parent is its connection
    /// (an HTTP/1 connection's parent is the listening socket).
    package func record(_ channel: any Channel) {
        let stream = channel.parent?.parent != nil
        let connection = stream ? channel.parent! : channel
        let id = ObjectIdentifier(connection)
        let isNew = state.withLock { state in
            if stream { state.report.http2Calls += 1 } else { state.report.http1Calls += 1 }
            state.inFlight += 1
            state.report.peakCallsInFlight = max(state.report.peakCallsInFlight, state.inFlight)
            guard state.open.insert(id).inserted else { return false }
            state.report.opened += 1
            state.report.peakOpen = max(state.report.peakOpen, state.open.count)
            return true
        }
        // The identifier is kept until the connection closes, so it cannot be reused meanwhile.
        if isNew {
            connection.closeFuture.whenComplete { [self] _ in _ = state.withLock { $0.open.remove(id) } }
        }
    }

    /// A call recorded by ``record(_:)`` was answered.
    package func answered() {
        state.withLock { $0.inFlight -= 1 }
    }

    package var report: SandboxConnectionReport {
        state.withLock { state in
            var report = state.report
            report.open = state.open.count
            return report
        }
    }
}

/// Records each call's connection in ``SandboxConnections``.
package struct SandboxConnectionMiddleware: RouterMiddleware {
    package typealias Context = SandboxRequestContext
    let connections: SandboxConnections

    package init(connections: SandboxConnections) {
        self.connections = connections
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        connections.record(context.channel)
        defer { connections.answered() }
        return try await next(request, context)
    }
}
