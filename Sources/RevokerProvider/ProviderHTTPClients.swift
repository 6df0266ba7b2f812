import AsyncHTTPClient
import NIOSSL
import Synchronization

/// The HTTP clients calls to providers go out on, taken in turn. Over HTTP/2 one client keeps
/// one connection to a host and queues what its streams cannot carry: a server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` is commonly 100 (RFC 9113's suggested minimum, and
/// SwiftNIO's default), so 1,024 calls in flight at 200 ms would go out at 500 a second on one
/// connection. One client per 100 calls in flight keeps them all on the wire. Over HTTP/1.1
/// each call still takes a connection of its own, whichever client carries it.
public final class ProviderHTTPClients: Sendable {
    /// Calls in flight one client (one HTTP/2 connection) is given.
    public static let callsPerClient = 100

    public let all: [HTTPClient]
    private let turn = Atomic<Int>(0)

    public init(_ clients: [HTTPClient]) {
        precondition(!clients.isEmpty, "at least one HTTP client")
        all = clients
    }

    /// Enough clients for `concurrency` calls in flight (see ``ProviderTransport/makeHTTPClient(eventLoopGroup:concurrency:extraTrustRoots:)``).
    public convenience init(concurrency: Int, extraTrustRoots: [NIOSSLCertificate] = []) {
        let count = max(1, (concurrency + Self.callsPerClient - 1) / Self.callsPerClient)
        self.init(
            (0..<count).map { _ in
                ProviderTransport.makeHTTPClient(concurrency: min(concurrency, Self.callsPerClient), extraTrustRoots: extraTrustRoots)
            }
        )
    }

    /// The client for the next call.
    public func next() -> HTTPClient {
        all.count == 1 ? all[0] : all[(turn.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max) % all.count]
    }

    /// Closes every client's connections.
    public func shutdown() async throws {
        for client in all { try await client.shutdown() }
    }
}
