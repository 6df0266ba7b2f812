import AppleSignIn
import Crypto
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ServiceLifecycle

/// The sandbox's request context: Hummingbird's basics plus the channel, so a fault can drop the connection.
public struct SandboxRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }
}

/// An answer decided before the real work (a fault, a refusal), thrown to end the handler early.
struct SandboxAnswer: Error {
    var response: Response
}
