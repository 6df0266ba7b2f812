import NIOCore
import NIOHTTP1
import NIOPosix

/// A one-route HTTP server on 127.0.0.1 that answers every request with a JWKS, standing in
/// for Apple's `/auth/keys` while a benchmark's setup fills a verifier's key cache.
struct LoopbackJWKSServer: Sendable {
    let channel: any Channel
    let port: Int

    static func start(serving jwks: some Sequence<UInt8>) async throws -> LoopbackJWKSServer {
        let body = ByteBuffer(bytes: jwks)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(JWKSHandler(body: body))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else {
            try await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return LoopbackJWKSServer(channel: channel, port: port)
    }

    func stop() async throws {
        try await channel.close()
    }
}

private final class JWKSHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let body: ByteBuffer

    init(body: ByteBuffer) {
        self.body = body
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
