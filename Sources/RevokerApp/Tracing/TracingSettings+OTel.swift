import Foundation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

extension TracingSettings {
    /// Adds `trace_id` and `span_id` (and `trace_flags`) to every log line written while a span
    /// is active; nil when tracing is off, so that logging costs nothing more then.
    public var loggingMetadataProvider: Logger.MetadataProvider? {
        enabled ? OTel.makeLoggingMetadataProvider() : nil
    }

    /// swift-otel's configuration: traces only (Revoker's logs and metrics have their own ways),
    /// over OTLP/HTTP with protobuf, its diagnostics through `logger`.
    func otelConfiguration(logger: Logger) throws -> OTel.Configuration {
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = endpoint
        configuration.traces.otlpExporter.headers = headers.map { ($0.name, $0.value) }
        // A collector that does not answer must not hold a shutdown (the flush of a drain's last
        // spans) past Revoker's own limit: 5 s instead of swift-otel's 10 s per call and 30 s per flush.
        configuration.traces.otlpExporter.timeout = .seconds(5)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(5)
        let sampler: OTel.Configuration.TracesConfiguration.SamplerConfiguration? =
            switch self.sampler {
            case .alwaysOn: .alwaysOn
            case .alwaysOff: .alwaysOff
            case .parentBasedAlwaysOn: .parentBasedAlwaysOn
            case .parentBasedAlwaysOff: .parentBasedAlwaysOff
            case .traceIDRatio: .traceIDRatio(ratio: samplerRatio)
            case .parentBasedTraceIDRatio: .parentBasedTraceIDRatio(ratio: samplerRatio)
            }
        guard let sampler else { throw RevokerAppError(.configuration, "tracing.sampler_arg must be between 0 and 1.") }
        configuration.traces.sampler = sampler
        return configuration
    }
}

/// The process's one tracing bootstrap: swift-distributed-tracing's global tracer can be
/// bootstrapped once, and its exporter must run exactly once.
enum TracingBootstrap {
    private static let done = Mutex(false)

    /// Whether a tracer is bootstrapped in this process.
    static var isBootstrapped: Bool { done.withLock { $0 } }

    /// Bootstraps the tracer and returns the exporter's service (flushing on graceful shutdown);
    /// nil when tracing is off or an earlier app of this process bootstrapped it already.
    static func start(_ settings: TracingSettings, logger: Logger) throws -> (any Service)? {
        guard settings.enabled else { return nil }
        return try done.withLock { done -> (any Service)? in
            guard !done else { return nil }
            let service: any Service
            do {
                service = try OTel.bootstrap(configuration: settings.otelConfiguration(logger: logger), environment: settings.otherVariables)
            } catch let error as RevokerAppError {
                throw error
            } catch {
                // swift-otel's errors name settings and files, never header values.
                throw RevokerAppError(.configuration, "Tracing cannot start: \(error)")
            }
            done = true
            // The host alone: a URL may carry a token.
            let host = URL(string: settings.endpoint)?.host ?? "?"
            logger.notice(
                "Tracing on: spans are exported over OTLP/HTTP",
                metadata: ["otel.host": "\(host)", "otel.sampler": "\(settings.sampler.rawValue)"]
            )
            return service
        }
    }
}
