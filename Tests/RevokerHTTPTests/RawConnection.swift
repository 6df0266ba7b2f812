import NIOCore
import NIOPosix
import RevokerTesting
import Synchronization

/// A TCP connection that sends exactly the bytes a test writes, as a slow or broken client
/// would, and keeps whatever the server answers.
struct RawConnection: Sendable {
    let channel: any Channel
    let received: Received

    final class Received: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let text = Mutex("")

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            text.withLock { $0 += String(buffer: buffer) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    /// Opens a connection to loopback `port`, from `source` (another loopback address, to be
    /// another client) when given.
    static func open(port: Int, from source: String? = nil) async throws -> RawConnection {
        let received = Received()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: false)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(received) } }
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, received: received)
    }

    func send(_ text: String) async throws { try await channel.writeAndFlush(ByteBuffer(string: text)) }

    /// Half-closes: the server reads the end of the stream.
    func finishSending() async throws { try await channel.close(mode: .output) }

    func close() async { try? await channel.close() }

    /// What arrived so far.
    var text: String { received.text.withLock { $0 } }

    /// Whether anything arrived within `limit`: a guard against a hang, or (short) the pace of
    /// a test that trickles bytes or shows that nothing arrives.
    func receives(within limit: Duration) async -> Bool {
        (try? await eventually("a reply", timeout: limit, every: .milliseconds(20)) { !text.isEmpty }) != nil
    }

    /// Whether the server closed the connection within `limit` (as ``receives(within:)``).
    func closes(within limit: Duration) async -> Bool {
        // Polled: waiting on the close future could not be cut short by a deadline.
        (try? await eventually("the server closes", timeout: limit, every: .milliseconds(20)) { !channel.isActive }) != nil
    }
}
