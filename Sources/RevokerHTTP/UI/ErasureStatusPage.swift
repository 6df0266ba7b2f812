import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RevokerStore

/// `/deletion-status/{code}`: the page a person reaches from their provider with the code of
/// their request to have their data deleted. Public (the person has no key), plain HTML without
/// scripts, reached only by the code (100 bits), and an address that asks for codes that do not
/// exist is refused for a while, so that codes cannot be enumerated. It shows when the request
/// arrived, what Revoker ended, and what the app's backend decided, with its justification; never
/// an account reference, a user id or an app's identifiers.
struct ErasureStatusPage {
    let erasures: ErasureRequests
    let store: DatabaseDeadline
    /// Unknown codes per client address.
    let throttle: SignInThrottle
    let secure: Bool

    static let path = "deletion-status"

    init(erasures: ErasureRequests, store: DatabaseDeadline, secure: Bool, limits: SignInThrottle.Limits = Self.limits) {
        self.erasures = erasures
        self.store = store
        self.secure = secure
        self.throttle = SignInThrottle(limits: limits)
    }

    /// Twenty unknown codes in fifteen minutes, then fifteen minutes refused.
    static let limits = SignInThrottle.Limits(failures: 20, window: .seconds(15 * 60), lockout: .seconds(15 * 60))

    /// The page's absolute URL: under `publicURL`, else the origin the request names.
    static func url(code: String, publicURL: URL?, request: Request) -> String {
        if let publicURL {
            var origin = publicURL.absoluteString
            while origin.hasSuffix("/") { origin.removeLast() }
            return "\(origin)/\(path)/\(code)"
        }
        // Only a plain host[:port]: the link is shown to the person.
        let named = request.head.authority ?? ""
        let plain =
            !named.isEmpty && named.utf8.count <= 255 && named.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-.:[]".contains($0)) }
        let host = plain ? named : "localhost"
        let name = host.split(separator: ":").first.map(String.init) ?? host
        let loopback = ["localhost", "127.0.0.1", "[::1]"].contains(name) || name.hasPrefix("127.")
        return "\(loopback ? "http" : "https")://\(host)/\(path)/\(code)"
    }

    func addRoutes(to router: Router<APIRequestContext>) {
        let pages = router.group(RouterPath(Self.path)).add(middleware: UIMiddleware<APIRequestContext>(secure: secure))
        pages.get("style.css") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/css; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: UITemplates.stylesheet))
            )
        }
        pages.get("{code}") { _, context in try await self.page(context) }
    }

    /// What the template shows.
    struct View {
        var heading: String
        var found: Bool
        var message: String?
        var code: String?
        var receivedAt: String?
        var sender: String?
        var signIn: String?
        var stateText: String?
        var stateClass: String?
        var decidedAt: String?
        var justification: String?
    }

    func page(_ context: APIRequestContext) async throws -> Response {
        let client = SignInThrottle.client(context.remoteAddress)
        if let wait = await throttle.refusal(for: client) {
            return render(Self.missing("Too many codes that match no request were tried from here. Try again later."), .tooManyRequests, wait)
        }
        let code = context.parameters.get("code") ?? ""
        guard let request = try await store({ [erasures, logger = context.logger] in try await erasures.request(code: code, logger: logger) })
        else {
            await throttle.failed(client)
            return render(Self.missing("No request has this code. Check it against the one you were given."), .notFound, nil)
        }
        return render(Self.view(request), .ok, nil)
    }

    static func missing(_ message: String) -> View {
        View(heading: "Data deletion request", found: false, message: message)
    }

    static func view(_ request: ErasureRequest) -> View {
        let state: (String, String) =
            switch request.state {
            case .received: ("In progress: the app has been told to delete your data and has not confirmed yet.", "open")
            case .deleted: ("Deleted: the app confirmed it deleted your data.", "good")
            case .refused: ("Not deleted: the app refused, for the reason below.", "bad")
            }
        let signIn =
            request.grantsEnded == 0
            ? "Nothing was held here for your sign-in with \(sender(request.provider))."
            : "Your sign-in with \(sender(request.provider)) was ended here"
                + (request.grantsEnded == 1 ? "." : " (\(request.grantsEnded) sign-ins).")
        return View(
            heading: "Data deletion request",
            found: true,
            code: request.code,
            receivedAt: UIFormat.time(request.receivedAt),
            sender: sender(request.provider),
            signIn: signIn,
            stateText: state.0,
            stateClass: state.1,
            decidedAt: request.decidedAt.map { UIFormat.time($0) },
            justification: request.justification
        )
    }

    static func sender(_ provider: String) -> String { provider.prefix(1).uppercased() + provider.dropFirst() }

    private func render(_ view: View, _ status: HTTPResponse.Status, _ retryAfter: Duration?) -> Response {
        let text = (try? UITemplates.shared.get().render(view, page: "erasure-status")) ?? (view.message ?? view.heading)
        var response = UIPage.html(text, status: status)
        if let retryAfter { response.headers[.retryAfter] = "\(max(1, retryAfter.components.seconds))" }
        return response
    }
}
