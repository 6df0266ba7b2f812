import Configuration
import Foundation
import RevokerProvider

/// OpenTelemetry tracing (`tracing` in the configuration file, and the standard `OTEL_*`
/// variables over it): spans exported over OTLP/HTTP with protobuf.
///
/// Off unless configured: on with `tracing.enabled: true`, or when an OTLP endpoint is given
/// (`tracing.endpoint`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`);
/// `tracing.enabled: false`, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off.
/// Off, nothing is bootstrapped: the tracer is the no-op one and the API makes no span.
public struct TracingSettings: Sendable {
    /// Whether spans are made and exported.
    public var enabled = false
    /// Where spans go: the full OTLP/HTTP traces URL.
    public var endpoint = "http://localhost:4318/v1/traces"
    /// Sent with every export; often an authorization token, so never logged or shown.
    public var headers: [Header] = []
    /// An OpenTelemetry sampler name (`parentbased_always_on` unless set).
    public var sampler = Sampler.parentBasedAlwaysOn
    /// The ratio of the `traceidratio` samplers, 0 to 1.
    public var samplerRatio = 1.0
    /// Whether the API follows a caller's `sampled` flag (`traceparent`): only when the operator
    /// trusts every caller. Otherwise the caller's trace is continued, sampled as the sampler decides.
    public var trustCallerSampling = false
    /// `service.name` of every span.
    public var serviceName = "revoker"
    /// The other `OTEL_*` variables, which swift-otel reads itself (batching, timeout, TLS files,
    /// resource attributes); never those Revoker reads above, so that their values, which swift-otel
    /// logs as it applies them, are never logged.
    public var otherVariables: [String: String] = [:]

    public init() {}

    /// One export header; `value` never shown.
    public struct Header: Sendable, CustomStringConvertible {
        public var name: String
        public var value: String

        public var description: String { "\(name): <redacted>" }
    }

    /// The samplers of the OpenTelemetry specification that swift-otel implements.
    public enum Sampler: String, Sendable, CaseIterable {
        case alwaysOn = "always_on"
        case alwaysOff = "always_off"
        case traceIDRatio = "traceidratio"
        case parentBasedAlwaysOn = "parentbased_always_on"
        case parentBasedAlwaysOff = "parentbased_always_off"
        case parentBasedTraceIDRatio = "parentbased_traceidratio"
    }

    /// The variables of the OpenTelemetry specification read into the `tracing` section.
    public enum Variable {
        public static let sdkDisabled = "OTEL_SDK_DISABLED"
        public static let tracesExporter = "OTEL_TRACES_EXPORTER"
        public static let endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
        public static let tracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        public static let headers = "OTEL_EXPORTER_OTLP_HEADERS"
        public static let tracesHeaders = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
        public static let sampler = "OTEL_TRACES_SAMPLER"
        public static let samplerArgument = "OTEL_TRACES_SAMPLER_ARG"
        public static let serviceName = "OTEL_SERVICE_NAME"
    }

    /// The `tracing` keys of the configuration file.
    static let fileKeys: [String: SettingShape] = [
        "enabled": .bool, "endpoint": .string, "headers": .secretString, "sampler": .string, "sampler_arg": .number,
        "service_name": .string, "trust_caller_sampling": .bool,
    ]

    /// The variables that set `tracing` keys; `traces_endpoint` and `traces_headers` only the environment sets.
    static let variables: [SettingVariable] = [
        .init(Variable.endpoint, sets: "tracing.endpoint"),
        .init(Variable.tracesEndpoint, sets: "tracing.traces_endpoint"),
        .init(Variable.headers, sets: "tracing.headers", .secretString),
        .init(Variable.tracesHeaders, sets: "tracing.traces_headers", .secretString),
        .init(Variable.sampler, sets: "tracing.sampler"),
        .init(Variable.samplerArgument, sets: "tracing.sampler_arg", .number),
        .init(Variable.serviceName, sets: "tracing.service_name"),
    ]

    /// `tracing`, with `environment` for the switches that are not settings (`OTEL_SDK_DISABLED`,
    /// `OTEL_TRACES_EXPORTER`) and for the variables swift-otel reads itself.
    init(reading source: SettingsSource, environment: [String: String]) throws {
        self.init()
        let reader = source.reader
        let baseEndpoint = reader.string(forKey: "endpoint")
        let tracesEndpoint = reader.string(forKey: "traces_endpoint")
        if let url = tracesEndpoint ?? baseEndpoint.map(Self.tracesURL(base:)) {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host != nil else {
                let setting = tracesEndpoint != nil ? Variable.tracesEndpoint : source.origin("endpoint")
                throw ConfigurationError("\(setting) must be an http:// or https:// URL (an OTLP/HTTP collector, such as http://collector:4318).")
            }
            endpoint = url
        }
        if let text = reader.string(forKey: "traces_headers", isSecret: true) ?? reader.string(forKey: "headers", isSecret: true) {
            headers = try Self.parseHeaders(text)
        }
        if let name = reader.string(forKey: "sampler") {
            guard let parsed = Sampler(rawValue: name.lowercased()) else {
                throw ConfigurationError(
                    "\(source.origin("sampler")) must be one of \(Sampler.allCases.map(\.rawValue).joined(separator: ", ")) (\(Variable.sampler))."
                )
            }
            sampler = parsed
        }
        samplerRatio = try source.double("sampler_arg", in: 0...1) ?? samplerRatio
        serviceName = reader.string(forKey: "service_name") ?? serviceName
        trustCallerSampling = reader.bool(forKey: "trust_caller_sampling") ?? trustCallerSampling
        let exporter = environment[Variable.tracesExporter]?.lowercased()
        let disabled = environment[Variable.sdkDisabled]?.lowercased() == "true" || exporter == "none"
        let endpointGiven = baseEndpoint != nil || tracesEndpoint != nil || exporter == "otlp"
        enabled = !disabled && (reader.bool(forKey: "enabled") ?? endpointGiven)
        let own = Set(Self.variables.map(\.name) + [Variable.sdkDisabled, Variable.tracesExporter])
        otherVariables = environment.filter { $0.key.hasPrefix("OTEL_") && !own.contains($0.key) && !$0.key.hasSuffix("_HEADERS") }
    }

    /// The share of callers' traces the operator's sampler keeps, or nil when callers' own
    /// `sampled` flags are trusted.
    public var callerSamplingRatio: Double? {
        guard !trustCallerSampling else { return nil }
        switch sampler {
        case .alwaysOn, .parentBasedAlwaysOn: return 1
        case .alwaysOff, .parentBasedAlwaysOff: return 0
        case .traceIDRatio, .parentBasedTraceIDRatio: return samplerRatio
        }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT`'s rule: the traces path appended to the collector's base URL.
    static func tracesURL(base: String) -> String {
        base.hasSuffix("/") ? base + "v1/traces" : base + "/v1/traces"
    }

    /// `name=value,name2=value2`, values percent-encoded (the OpenTelemetry format). The error
    /// names the setting, never a value.
    static func parseHeaders(_ text: String) throws -> [Header] {
        try text.split(separator: ",").compactMap { item in
            let pair = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 1, pair[0].isEmpty { return nil }
            guard pair.count == 2, !pair[0].isEmpty, pair[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }),
                let value = pair[1].removingPercentEncoding
            else {
                throw ConfigurationError(
                    "The OTLP headers (tracing.headers, \(Variable.headers) or \(Variable.tracesHeaders)) must read name=value,name2=value2."
                )
            }
            return Header(name: pair[0], value: value)
        }
    }
}
