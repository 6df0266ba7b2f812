import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// A request body that did not arrive within ``HTTPSettings/bodyTimeout``.
struct RequestBodyTimeout: Error {}

/// Bounds how long a client may take over a request, so that slow or stalled clients
/// (slowloris) cannot hold connections: the head must arrive within the header timeout of its
/// first byte, the body within the body timeout of the head. Idle connections are
/// Hummingbird's idle timeout's to close.
///
/// Two handlers share one clock: ``RequestTimeouts`` sits after the HTTP decoder and sees
/// requests' parts; on being added it puts a ``FirstByteWatch`` at the front of the pipeline,
/// the only place where a head's first bytes are visible before the head is complete.
final class RequestTimeouts: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    enum Phase {
        /// No request is being read: the next byte starts a head.
        case waiting
        /// A head has begun; the header timer runs.
        case readingHead
        /// A head arrived; the body timer runs until its end.
        case readingBody
        /// The request was read; the response is being produced.
        case answering
    }

    let headerTimeout: TimeAmount
    let bodyTimeout: TimeAmount
    var phase = Phase.waiting
    private var timer: Scheduled<Void>?
    private var unanswered = 0

    init(headerTimeout: Duration, bodyTimeout: Duration) {
        self.headerTimeout = TimeAmount(headerTimeout)
        self.bodyTimeout = TimeAmount(bodyTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        try? context.pipeline.syncOperations.addHandler(FirstByteWatch(clock: self, context: context), position: .first)
    }

    func handlerRemoved(context: ChannelHandlerContext) { cancelTimer() }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    /// Called by ``FirstByteWatch`` for every read, before the decoder sees it.
    func bytesArrived(_ context: ChannelHandlerContext) {
        guard case .waiting = phase else { return }
        phase = .readingHead
        schedule(headerTimeout, context) { [weak self] in
            guard let self, case .readingHead = self.phase else { return }
            // Nothing of this request reached the application: answer and close here.
            var headers = HTTPFields()
            headers[.connection] = "close"
            headers[.contentLength] = "0"
            context.write(self.wrapOutboundOut(.head(HTTPResponse(status: .requestTimeout, headerFields: headers))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            phase = .readingBody
            schedule(bodyTimeout, context) { [weak self] in
                guard let self, case .readingBody = self.phase else { return }
                // The application is reading the body: its read fails, and it answers 408.
                context.fireErrorCaught(RequestBodyTimeout())
            }
        case .body:
            break
        case .end:
            cancelTimer()
            // An answer may already have gone out (a refusal sent before the body was read).
            phase = unanswered > 0 ? .answering : .waiting
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered -= 1
            if unanswered <= 0, case .answering = phase { phase = .waiting }
        }
        context.write(data, promise: promise)
    }

    private func schedule(_ delay: TimeAmount, _ context: ChannelHandlerContext, _ fire: @escaping () -> Void) {
        cancelTimer()
        timer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: delay, fire)
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }
}

/// Tells ``RequestTimeouts`` when bytes arrive, before the HTTP decoder turns them into parts.
final class FirstByteWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let clock: RequestTimeouts
    let clockContext: ChannelHandlerContext

    init(clock: RequestTimeouts, context: ChannelHandlerContext) {
        self.clock = clock
        self.clockContext = context
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        clock.bytesArrived(clockContext)
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension RequestTimeouts: Sendable {}

@available(*, unavailable)
extension FirstByteWatch: Sendable {}
