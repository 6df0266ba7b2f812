import Hummingbird
import NIOCore

/// The sandbox's request context: Hummingbird's basics plus the channel, so a fault can drop the connection.
public struct SandboxRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    package let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}

/// An answer decided before the real work (a fault, a refusal), thrown to end the handler early.
package struct SandboxAnswer: Error {
    package var response: Response

    package init(response: Response) {
        self.response = response
    }
}
