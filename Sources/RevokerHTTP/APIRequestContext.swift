import Hummingbird
import NIOCore

/// The request context of the API: Hummingbird's basics and the client's address.
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection the request came on (a proxy's, behind one).
    public var remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}
