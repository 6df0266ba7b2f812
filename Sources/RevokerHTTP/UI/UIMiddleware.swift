import HTTPTypes
import Hummingbird
import NIOCore

/// Every answer under `/ui/` is HTML with the security headers, errors included: a refusal
/// becomes a page that says what is wrong, never the API's JSON.
struct UIMiddleware<Context: RequestContext>: RouterMiddleware {
    let secure: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await ProblemMiddleware<Context>().handle(request, context: context, next: next)
        } catch let problem as APIProblem {
            response = UIPage.error(problem)
        }
        for (name, value) in Self.headers(secure: secure) where response.headers[name] == nil {
            response.headers[name] = value
        }
        return response
    }

    /// No script, no frame, no foreign origin; nothing cached.
    static func headers(secure: Bool) -> [(HTTPField.Name, String)] {
        var headers: [(HTTPField.Name, String)] = [
            (
                .contentSecurityPolicy,
                "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
            ),
            (.xContentTypeOptions, "nosniff"),
            // Not no-referrer: with it Chromium sends `Origin: null` on this site's own forms.
            (HTTPField.Name("Referrer-Policy")!, "same-origin"),
            (HTTPField.Name("X-Frame-Options")!, "DENY"),
            (HTTPField.Name("Cross-Origin-Opener-Policy")!, "same-origin"),
            (.crossOriginResourcePolicy, "same-origin"),
            (HTTPField.Name("Permissions-Policy")!, "camera=(), microphone=(), geolocation=(), interest-cohort=()"),
            (.cacheControl, "no-store"),
        ]
        if secure { headers.append((.strictTransportSecurity, "max-age=31536000")) }
        return headers
    }
}

/// Responses of the compliance pages.
enum UIPage {
    /// A rendered page.
    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A refusal as a page, with the problem's own headers (`Retry-After`).
    static func error(_ problem: APIProblem) -> Response {
        let view = UIErrorView(heading: "\(problem.status.code) \(problem.status.reasonPhrase)", message: problem.detail)
        let text = (try? UITemplates.shared.get().render(view, page: "ui-error")) ?? problem.detail
        var response = html(text, status: problem.status)
        for field in problem.headers where field.name != .wwwAuthenticate { response.headers[field.name] = field.value }
        return response
    }

    /// A file to save.
    static func download(_ text: String, type: String, filename: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: type, .contentDisposition: "attachment; filename=\"\(filename)\""],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }
}
