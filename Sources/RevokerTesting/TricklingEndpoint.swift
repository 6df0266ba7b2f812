import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A webhook endpoint on a free loopback port that accepts every POST with a `200` head
/// announcing a long body, then sends that body one byte at a time: an app backend that stalls
/// after answering. Plain TCP, so that nothing between it and the client buffers or times out.
public final class TricklingEndpoint: Sendable {
    /// One POST and its answer.
    public struct Exchange: Sendable {
        /// The `webhook-id` received.
        public var webhookID: String
        /// When the POST had arrived whole and the head was sent.
        public var answeredAt: Date
        /// When the connection closed; nil while it is open.
        public var closedAt: Date?
        /// Bytes of the body sent so far.
        public var bodyBytesSent: Int
    }

    /// `http://127.0.0.1:PORT/hook`.
    public let url: String
    /// The `Content-Length` announced.
    public let contentLength: Int
    private let recorded: Recorder

    private init(url: String, contentLength: Int, recorded: Recorder) {
        self.url = url
        self.contentLength = contentLength
        self.recorded = recorded
    }

    /// Every POST answered so far, in arrival order.
    public var exchanges: [Exchange] { recorded.exchanges.withLock { $0 } }

    /// The `webhooks` entry for Revoker's configuration; any secret file will do, as nothing is verified.
    public func configurationEntry(name: String, secretFile: String, clientIDs: [String]) -> [String: any Sendable] {
        ["name": name, "url": url, "secret_file": secretFile, "client_ids": clientIDs]
    }

    /// Starts an endpoint that sends a byte of the body every `interval`, runs `body`, stops it.
    public static func with<T: Sendable>(
        contentLength: Int = 1000,
        every interval: Duration = .milliseconds(200),
        _ body: (TricklingEndpoint) async throws -> T
    ) async throws -> T {
        let recorded = Recorder()
        let pause = TimeAmount(interval)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        Connection(recorded: recorded, contentLength: contentLength, interval: pause)
                    )
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let endpoint = TricklingEndpoint(
            url: "http://127.0.0.1:\(server.localAddress?.port ?? 0)/hook",
            contentLength: contentLength,
            recorded: recorded
        )
        do {
            let result = try await body(endpoint)
            try? await server.close()
            return result
        } catch {
            try? await server.close()
            throw error
        }
    }

    final class Recorder: Sendable {
        let exchanges = Mutex<[Exchange]>([])
    }

    /// Reads one request (head and `Content-Length` body), then answers it and trickles.
    final class Connection: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let recorded: Recorder
        let contentLength: Int
        let interval: TimeAmount
        var received = ByteBuffer()
        var index: Int?
        var trickle: RepeatedTask?

        init(recorded: Recorder, contentLength: Int, interval: TimeAmount) {
            self.recorded = recorded
            self.contentLength = contentLength
            self.interval = interval
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            received.writeBuffer(&buffer)
            guard index == nil, let webhookID = Self.wholeRequest(received) else { return }
            let exchange = Exchange(webhookID: webhookID, answeredAt: Date(), closedAt: nil, bodyBytesSent: 0)
            let index = recorded.exchanges.withLock { exchanges in
                exchanges.append(exchange)
                return exchanges.count - 1
            }
            self.index = index
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: \(contentLength)\r\n\r\n")), promise: nil)
            let (channel, recorded, length) = (context.channel, recorded, contentLength)
            trickle = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { task in
                let sent = recorded.exchanges.withLock { exchanges in
                    exchanges[index].bodyBytesSent += 1
                    return exchanges[index].bodyBytesSent
                }
                channel.writeAndFlush(ByteBuffer(string: "x"), promise: nil)
                if sent >= length { task.cancel() }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            trickle?.cancel()
            if let index { recorded.exchanges.withLock { $0[index].closedAt = Date() } }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

        /// The request's `webhook-id` once its head and body have arrived whole.
        static func wholeRequest(_ buffer: ByteBuffer) -> String? {
            let text = String(buffer: buffer)
            guard let end = text.range(of: "\r\n\r\n") else { return nil }
            var webhookID = ""
            var length = 0
            for line in text[..<end.lowerBound].split(separator: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2 else { continue }
                switch parts[0].lowercased() {
                case "webhook-id": webhookID = parts[1]
                case "content-length": length = Int(parts[1]) ?? 0
                default: break
                }
            }
            guard text.utf8.count - text[..<end.upperBound].utf8.count >= length else { return nil }
            return webhookID
        }
    }
}
