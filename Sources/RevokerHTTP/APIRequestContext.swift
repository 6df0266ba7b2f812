import Hummingbird
import NIOCore

/// The request context of the API: Hummingbird's basics, the client's address, and how bodies
/// are read (``StrictJSONDecoder``) and values answered (``APIResponseEncoder``).
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer of the connection the request came on (a proxy's, behind one).
    public var remoteAddress: SocketAddress?
    /// The largest body ``requestDecoder`` reads; a route that takes a body sets its own
    /// (``HTTPSettings/maxBodyBytes``).
    public var maxUploadSize = HTTPSettings().maxBodyBytes

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    public var requestDecoder: StrictJSONDecoder { StrictJSONDecoder() }
    public var responseEncoder: APIResponseEncoder { APIResponseEncoder() }
}
