import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import RevokerProvider

/// Random values for codes, tokens and key ids.
package enum SandboxRandom {
    /// 64 random hex digits.
    package static func hex() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let digits = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
    }
}

/// JSON answers with sorted keys.
package enum SandboxJSON {
    package static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    /// An OAuth error body: `{"error": …, "error_description": …}`.
    package static func oauthError(_ code: String, description: String? = nil, status: HTTPResponse.Status = .badRequest) -> Response {
        var body = ["error": code]
        if let description { body["error_description"] = description }
        return response(body, status: status)
    }
}

extension Data {
    package var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes unpadded base64url, byte by byte (this runs on every sandbox call).
    package init?(base64URL text: Substring) {
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            default: bytes.append(byte)
            }
        }
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4))
        self.init(base64Encoded: Data(bytes))
    }
}

/// The form body of a provider call.
package enum SandboxForm {
    /// The fields, or why the call is not shaped as a provider requires: `secretParameters`
    /// must travel in a form body, never in the query string.
    package static func fields(of request: Request, secretParameters: Set<String>) async throws -> Result<[String: String], SandboxFormProblem> {
        if let query = request.uri.query, let fields = FormEncoding.decode(query), !secretParameters.isDisjoint(with: fields.keys) {
            return .failure(SandboxFormProblem(reason: "secrets must be sent in the body, not the query string"))
        }
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?.lowercased().filter { $0 != " " }
        guard mediaType == FormEncoding.contentType else {
            return .failure(SandboxFormProblem(reason: "the body must be \(FormEncoding.contentType)"))
        }
        let body = try await request.body.collect(upTo: 64 * 1024)
        guard let fields = FormEncoding.decode(String(buffer: body)) else {
            return .failure(SandboxFormProblem(reason: "the body is not a valid form"))
        }
        return .success(fields)
    }
}

/// Why a call's form was refused.
package struct SandboxFormProblem: Error, Sendable {
    package var reason: String
}

/// A provider's sandbox that can be served beside another, under its own prefix.
public protocol MountableSandbox: Sendable {
    /// Adds the sandbox's routes under its prefix.
    func addRoutes(to router: Router<SandboxRequestContext>)
}

/// A sandbox served under a prefix beside Apple's, or alone at the root.
public protocol PrefixedSandbox: MountableSandbox {
    /// Where its routes start beside the others (`/google`).
    static var prefix: String { get }
    /// The `Server` header it answers with, and its logger's label.
    static var serverName: String { get }
    /// Adds its routes under `prefix`.
    func addRoutes(to router: Router<SandboxRequestContext>, prefix: String)
}

extension PrefixedSandbox {
    /// Adds the sandbox's routes under ``prefix``, to serve it beside the others.
    public func addRoutes(to router: Router<SandboxRequestContext>) {
        addRoutes(to: router, prefix: Self.prefix)
    }

    /// An application serving the sandbox at the root; `onServerRunning` receives the bound port.
    public func application(
        host: String = "127.0.0.1",
        port: Int = 0,
        logger: Logger? = nil,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: SandboxRequestContext.self)
        addRoutes(to: router, prefix: "")
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: Self.serverName),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger ?? Logger(label: "revoker.sandbox." + Self.serverName)
        )
    }
}

/// Messages a sandbox pushed to receivers (notifications, security events), for replays.
package actor SentMessages {
    private var sent: [String: (message: Data, url: String)] = [:]

    package init() {}

    package func remember(_ jti: String, message: Data, url: String) {
        sent[jti] = (message, url)
    }

    package func sent(_ jti: String) -> (message: Data, url: String)? { sent[jti] }

    /// POSTs `message` to `url` as a provider pushes it; returns the receiver's status and body
    /// (at most 4 KiB of it).
    package static func push(_ message: Data, to url: String, contentType: String, userAgent: String) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: contentType)
        request.headers.add(name: "User-Agent", value: userAgent)
        request.body = .bytes(ByteBuffer(data: message))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        var body = try await response.body.collect(upTo: 1024 * 1024)
        return (Int(response.status.code), body.readString(length: min(body.readableBytes, 4096)) ?? "")
    }
}
