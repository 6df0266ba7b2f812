import Hummingbird
import NIOCore
import ServiceLifecycle

/// Failures a sandbox injects into its provider's calls, as shares between 0 and 1 of all calls.
///
/// Set at start (the sandbox's configuration) or at run time (`PUT /sandbox/faults`).
public struct SandboxFaults: Codable, Sendable, Equatable {
    enum CodingKeys: String, CodingKey {
        case internalErrorRate = "internal_error_rate"
        case unavailableRate = "unavailable_rate"
        case throttleRate = "throttle_rate"
        case retryAfterSeconds = "retry_after_seconds"
        case latencyMilliseconds = "latency_ms"
        case hangRate = "hang_rate"
        case dropRate = "drop_rate"
    }

    /// Share answered `500`.
    public var internalErrorRate: Double
    /// Share answered `503`.
    public var unavailableRate: Double
    /// Share answered `429` with ``retryAfterSeconds``.
    public var throttleRate: Double
    /// The `Retry-After` sent with a `429`.
    public var retryAfterSeconds: Int
    /// Added to every call before it is answered.
    public var latencyMilliseconds: Int
    /// Share never answered (the client's deadline fires).
    public var hangRate: Double
    /// Share whose connection is closed without an answer.
    public var dropRate: Double

    public init(
        internalErrorRate: Double = 0,
        unavailableRate: Double = 0,
        throttleRate: Double = 0,
        retryAfterSeconds: Int = 1,
        latencyMilliseconds: Int = 0,
        hangRate: Double = 0,
        dropRate: Double = 0
    ) {
        self.internalErrorRate = internalErrorRate
        self.unavailableRate = unavailableRate
        self.throttleRate = throttleRate
        self.retryAfterSeconds = retryAfterSeconds
        self.latencyMilliseconds = latencyMilliseconds
        self.hangRate = hangRate
        self.dropRate = dropRate
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            internalErrorRate: try container.decodeIfPresent(Double.self, forKey: .internalErrorRate) ?? 0,
            unavailableRate: try container.decodeIfPresent(Double.self, forKey: .unavailableRate) ?? 0,
            throttleRate: try container.decodeIfPresent(Double.self, forKey: .throttleRate) ?? 0,
            retryAfterSeconds: try container.decodeIfPresent(Int.self, forKey: .retryAfterSeconds) ?? 1,
            latencyMilliseconds: try container.decodeIfPresent(Int.self, forKey: .latencyMilliseconds) ?? 0,
            hangRate: try container.decodeIfPresent(Double.self, forKey: .hangRate) ?? 0,
            dropRate: try container.decodeIfPresent(Double.self, forKey: .dropRate) ?? 0
        )
    }

    /// No faults at all.
    public static let none = SandboxFaults()

    /// A problem with the values, or `nil` when they are usable.
    public var problem: String? {
        let rates = [internalErrorRate, unavailableRate, throttleRate, hangRate, dropRate]
        if rates.contains(where: { !(0...1).contains($0) }) { return "every rate must be between 0 and 1" }
        if rates.reduce(0, +) > 1 { return "the rates must add up to at most 1" }
        if !(0...86_400).contains(retryAfterSeconds) { return "retry_after_seconds must be between 0 and 86400" }
        if !(0...600_000).contains(latencyMilliseconds) { return "latency_ms must be between 0 and 600000" }
        return nil
    }

    /// What happens to one call, decided by a uniform draw in 0..<1.
    package enum Fault: Equatable, Sendable {
        case internalError, unavailable, throttle, hang, drop
    }

    package func fault(for draw: Double) -> Fault? {
        var threshold = 0.0
        for (rate, fault) in [
            (internalErrorRate, Fault.internalError), (unavailableRate, .unavailable), (throttleRate, .throttle), (hangRate, .hang),
            (dropRate, .drop),
        ] {
            threshold += rate
            if draw < threshold { return fault }
        }
        return nil
    }
}

extension SandboxFaults {
    /// Applies the latency and maybe a fault to one call. Returns the answer to send instead of
    /// the real one (or throws, for a hang or a drop); `record` notes the status given (0 when
    /// none) and an error word.
    package func inject(
        context: SandboxRequestContext,
        record: (_ status: Int, _ error: String?) async -> Void
    ) async throws -> Response? {
        if latencyMilliseconds > 0 { try await Task.sleep(for: .milliseconds(latencyMilliseconds)) }
        guard let fault = fault(for: Double.random(in: 0..<1)) else { return nil }
        switch fault {
        case .internalError:
            await record(500, nil)
            return Self.page(.internalServerError, "Internal Server Error")
        case .unavailable:
            await record(503, nil)
            return Self.page(.serviceUnavailable, "Service Unavailable")
        case .throttle:
            await record(429, nil)
            return Response(status: .tooManyRequests, headers: [.retryAfter: "\(retryAfterSeconds)"])
        case .hang:
            await record(0, "hang")
            // Until the client gives up; a shutting-down sandbox stops hanging at once.
            try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(600)) }
            throw HTTPError(.gatewayTimeout)
        case .drop:
            await record(0, "drop")
            try await context.channel.close()
            throw HTTPError(.internalServerError)
        }
    }

    /// An HTML error page, as a front end answers when the service behind it fails.
    private static func page(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "text/html"],
            body: .init(byteBuffer: ByteBuffer(string: "<html><body>\(text)</body></html>"))
        )
    }
}
