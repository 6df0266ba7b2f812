/// Failures the sandbox injects into `/auth/*` calls, as shares between 0 and 1 of all calls.
///
/// Set at start (``AppleSandbox/Configuration/faults``) or at run time (`PUT /sandbox/faults`).
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
    enum Fault: Equatable {
        case internalError, unavailable, throttle, hang, drop
    }

    func fault(for draw: Double) -> Fault? {
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
