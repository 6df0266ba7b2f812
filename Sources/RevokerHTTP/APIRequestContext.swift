import Hummingbird
import NIOCore

/// The request context of the API: Hummingbird's basics.
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }
}
