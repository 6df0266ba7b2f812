import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Admin request and response bodies (`/sandbox/*`) of the sandboxes; each provider's sandbox
/// adds its own.
public enum SandboxAdmin {
    /// The minted code or token and the grant it belongs to.
    public struct Minted: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case value
            case grantID = "grant_id"
        }
        public var value: String
        public var grantID: String

        package init(value: String, grantID: String) {
            self.value = value
            self.grantID = grantID
        }
    }

    /// An identity token, or a key id after rotation.
    public struct Value: Codable, Sendable {
        public var value: String

        package init(value: String) {
            self.value = value
        }
    }

    /// `POST /sandbox/clock`: moves the sandbox's clock forward (it stops a century ahead).
    public struct AdvanceClock: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case advanceSeconds = "advance_seconds"
        }
        /// At least 0: the clock never goes back.
        public var advanceSeconds: Double

        public init(advanceSeconds: Double) {
            self.advanceSeconds = advanceSeconds
        }

        /// Why the sandbox refuses it, or nil.
        package var problem: String? {
            advanceSeconds.isFinite && advanceSeconds >= 0 ? nil : "advance_seconds must be a number of seconds, 0 or more"
        }
    }

    /// The sandbox's time once its clock moved.
    public struct ClockTime: Codable, Sendable {
        /// Seconds since 1970.
        public var now: Double

        package init(now: Double) {
            self.now = now
        }
    }
}

/// An admin call a sandbox refused.
public struct SandboxAdminFailure: Error, CustomStringConvertible {
    public var path: String
    public var status: Int
    public var description: String { "The sandbox answered \(status) to \(path)." }
}

/// JSON calls to a running sandbox's admin surface.
package struct SandboxAdminTransport: Sendable {
    package let baseURL: String
    let httpClient: HTTPClient

    package init(baseURL: String, httpClient: HTTPClient) {
        self.baseURL = baseURL
        self.httpClient = httpClient
    }

    /// Sends `body` as JSON; throws ``SandboxAdminFailure`` for an answer other than 2xx.
    package func send(_ method: HTTPMethod, _ path: String, body: (some Encodable)? = [String: String]?.none) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: try JSONEncoder().encode(body)))
        }
        let response = try await httpClient.execute(request, timeout: .seconds(30))
        let data = try await response.body.collect(upTo: 256 * 1024 * 1024)
        guard (200..<300).contains(response.status.code) else { throw SandboxAdminFailure(path: path, status: Int(response.status.code)) }
        return data
    }

    /// `POST /sandbox/clock`: moves the sandbox's clock `seconds` forward.
    package func advanceClock(by seconds: Double) async throws {
        _ = try await send(.POST, "/sandbox/clock", body: SandboxAdmin.AdvanceClock(advanceSeconds: seconds))
    }

    package func decode<T: Decodable>(_ buffer: ByteBuffer, as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: buffer)
    }
}
