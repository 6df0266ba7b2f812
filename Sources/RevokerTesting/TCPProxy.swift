import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on a free loopback port in front of a server (PostgreSQL, in the tests) that the
/// test can freeze (from then on it forwards nothing in either direction and keeps every
/// connection open, as a server that stopped answering without closing anything would) and
/// whose connections it can cut, as a failover does.
public final class TCPProxy: Sendable {
    /// The loopback port clients connect to.
    public let port: Int
    private let frozen = Atomic(false)
    /// Both channels of every connection relayed now, by connection.
    private let open = Mutex<[Int: [any Channel]]>([:])
    private let nextConnection = Atomic(0)

    private init(port: Int) { self.port = port }

    /// Stops forwarding: bytes sent either way are dropped, connections stay open.
    public func freeze() { frozen.store(true, ordering: .sequentiallyConsistent) }

    /// Forwards again. A connection that lost bytes while frozen is unusable: cut the open ones
    /// first (``cutAll()``) so that clients start afresh.
    public func thaw() { frozen.store(false, ordering: .sequentiallyConsistent) }

    /// Closes every open connection on both sides at once, as a server that went away (or an
    /// HAProxy moving to a new primary) does; new connections are relayed as before.
    /// Returns how many it cut.
    @discardableResult
    public func cutAll() -> Int {
        let cut = open.withLock { open in
            defer { open.removeAll() }
            return Array(open.values)
        }
        for channels in cut { for channel in channels { channel.close(promise: nil) } }
        return cut.count
    }

    var isFrozen: Bool { frozen.load(ordering: .sequentiallyConsistent) }

    /// Runs a proxy to `host:port` for the duration of `body`.
    public static func with<T: Sendable>(toHost host: String, port: Int, _ body: (TCPProxy) async throws -> T) async throws -> T {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        let proxy = TCPProxy(port: server.channel.localAddress?.port ?? 0)
        let outcome = await withTaskGroup(of: Void.self) { group -> Result<T, any Error> in
            group.addTask {
                try? await withThrowingDiscardingTaskGroup { connections in
                    try await server.executeThenClose { inbound in
                        for try await client in inbound {
                            connections.addTask { await proxy.relay(client, toHost: host, port: port) }
                        }
                    }
                }
            }
            let result: Result<T, any Error>
            do {
                result = .success(try await body(proxy))
            } catch {
                result = .failure(error)
            }
            group.cancelAll()
            return result
        }
        return try outcome.get()
    }

    /// Copies bytes both ways, dropping them once frozen, until either side closes.
    private func relay(_ client: NIOAsyncChannel<ByteBuffer, ByteBuffer>, toHost host: String, port: Int) async {
        do {
            let upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
            let id = nextConnection.wrappingAdd(1, ordering: .relaxed).oldValue
            open.withLock { $0[id] = [client.channel, upstream.channel] }
            defer { _ = open.withLock { $0.removeValue(forKey: id) } }
            try await client.executeThenClose { clientIn, clientOut in
                try await upstream.executeThenClose { upstreamIn, upstreamOut in
                    try await withThrowingTaskGroup(of: Void.self) { pair in
                        pair.addTask { for try await chunk in clientIn where !self.isFrozen { try await upstreamOut.write(chunk) } }
                        pair.addTask { for try await chunk in upstreamIn where !self.isFrozen { try await clientOut.write(chunk) } }
                        try await pair.next()
                        pair.cancelAll()
                    }
                }
            }
        } catch {
            // A side closed or failed: both are closed by now.
        }
    }
}
