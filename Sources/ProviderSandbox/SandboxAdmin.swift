import AsyncHTTPClient
import Foundation
import Hummingbird
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

    /// `POST /sandbox/codes`, `/sandbox/refresh-tokens`, `/sandbox/access-tokens`: a user signs in.
    public struct Mint: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case subject
            case redirectURI = "redirect_uri"
            case lifetimeSeconds = "lifetime_seconds"
        }
        public var clientID: String
        /// The provider's user id the grant belongs to.
        public var subject: String
        /// Codes only: the redirect_uri the code is bound to.
        public var redirectURI: String?
        /// Codes only: overrides the configured code lifetime.
        public var lifetimeSeconds: Double?
        public init(clientID: String, subject: String, redirectURI: String? = nil, lifetimeSeconds: Double? = nil) {
            self.clientID = clientID
            self.subject = subject
            self.redirectURI = redirectURI
            self.lifetimeSeconds = lifetimeSeconds
        }
    }

    /// `POST /sandbox/keys/rotate`.
    public struct RotateKeys: Codable, Sendable {
        /// Stop publishing every older key.
        public var retire: Bool?
        public init(retire: Bool? = nil) { self.retire = retire }
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

/// The admin calls every sandbox answers alike, under its base URL; a provider's admin client
/// conforms and adds its own (registering apps, notifications, …).
public protocol SandboxAdminClient: Sendable {
    /// Where the sandbox's routes start.
    var baseURL: String { get }
    /// The client the calls go through (trusting the sandbox's authority over HTTPS).
    var httpClient: HTTPClient { get }
}

extension SandboxAdminClient {
    package var transport: SandboxAdminTransport { SandboxAdminTransport(baseURL: baseURL, httpClient: httpClient) }

    /// A grant whose refresh token the app already holds.
    public func mintRefreshToken(clientID: String, subject: String) async throws -> SandboxAdmin.Minted {
        try await transport.decode(transport.send(.POST, "/sandbox/refresh-tokens", body: SandboxAdmin.Mint(clientID: clientID, subject: subject)))
    }

    /// A grant of which the app only holds an access token.
    public func mintAccessToken(clientID: String, subject: String) async throws -> SandboxAdmin.Minted {
        try await transport.decode(transport.send(.POST, "/sandbox/access-tokens", body: SandboxAdmin.Mint(clientID: clientID, subject: subject)))
    }

    /// Publishes a new signing key and returns its `kid`; with `retire`, the older keys stop
    /// being published.
    public func rotateKeys(retire: Bool = false) async throws -> String {
        try await transport.decode(
            transport.send(.POST, "/sandbox/keys/rotate", body: SandboxAdmin.RotateKeys(retire: retire)),
            as: SandboxAdmin.Value.self
        )
        .value
    }

    /// What happened to one grant.
    public func grant(_ id: String) async throws -> SandboxGrantReport {
        try await transport.decode(transport.send(.GET, "/sandbox/grants/\(id)"))
    }

    /// What happened to every grant, in the order they were created.
    public func grants() async throws -> [SandboxGrantReport] {
        try await transport.decode(transport.send(.GET, "/sandbox/grants"))
    }

    /// Counters over every call to the provider's endpoints, key-set fetches among them.
    public func statistics() async throws -> SandboxStatistics {
        try await transport.decode(transport.send(.GET, "/sandbox/statistics"))
    }

    /// Replaces the injected faults.
    public func setFaults(_ faults: SandboxFaults) async throws {
        _ = try await transport.send(.PUT, "/sandbox/faults", body: faults)
    }

    /// Replaces the faults injected into the key set and the provider's other published
    /// documents (and nothing else).
    public func setKeyFaults(_ faults: SandboxFaults) async throws {
        _ = try await transport.send(.PUT, "/sandbox/key-faults", body: faults)
    }

    /// Moves the sandbox's clock `seconds` forward, so codes, tokens and client secrets age
    /// without waiting; it never goes back.
    public func advanceClock(by seconds: Double) async throws {
        try await transport.advanceClock(by: seconds)
    }
}

/// What every sandbox's state answers for the admin calls all sandboxes share.
package protocol SandboxRecords: Actor {
    var faults: SandboxFaults { get }
    var keyFaults: SandboxFaults { get }
    func setFaults(_ faults: SandboxFaults)
    func setKeyFaults(_ faults: SandboxFaults)
    func report(_ grantID: String) -> SandboxGrantReport?
    func reports() -> [SandboxGrantReport]
    func currentStatistics() -> SandboxStatistics
}

extension RouterGroup where Context == SandboxRequestContext {
    /// The admin calls every sandbox answers alike (``SandboxAdminClient``): grants, statistics,
    /// faults, key faults and the clock.
    package func addSharedAdminRoutes(state: some SandboxRecords, clock: SandboxClock) {
        get("grants") { _, _ in SandboxJSON.response(await state.reports()) }
        get("grants/:id") { _, context in
            guard let id = context.parameters.get("id"), let report = await state.report(id) else { throw HTTPError(.notFound) }
            return SandboxJSON.response(report)
        }
        get("statistics") { _, _ in SandboxJSON.response(await state.currentStatistics()) }
        clock.addRoute(to: self)
        get("faults") { _, _ in SandboxJSON.response(await state.faults) }
        put("faults") { request, context in
            let faults = try await request.decode(as: SandboxFaults.self, context: context)
            if let problem = faults.problem { throw HTTPError(.badRequest, message: problem) }
            await state.setFaults(faults)
            return SandboxJSON.response(faults)
        }
        get("key-faults") { _, _ in SandboxJSON.response(await state.keyFaults) }
        put("key-faults") { request, context in
            let faults = try await request.decode(as: SandboxFaults.self, context: context)
            if let problem = faults.problem { throw HTTPError(.badRequest, message: problem) }
            await state.setKeyFaults(faults)
            return SandboxJSON.response(faults)
        }
    }
}
