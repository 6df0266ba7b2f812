import CoreMetrics
import RevokerProvider
import RevokerStore

/// The worker's metrics, through swift-metrics: the factory is injected so that each server (and
/// each test) can export its own registry. Every label is bounded: outcomes, endpoints, status
/// classes; never a message, an id or a client-supplied value.
public struct WorkerMetrics: Sendable {
    let factory: any MetricsFactory

    /// Metrics through `factory` (default: the process-wide `MetricsSystem` factory, a no-op
    /// until bootstrapped).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// A request ended with `outcome`.
    public func finished(_ outcome: RevocationOutcome) {
        Counter(label: "revoker_requests_finished_total", dimensions: [("outcome", outcome.rawValue)], factory: factory).increment()
    }

    /// A worker claimed a request: one attempt starts.
    public func attemptStarted() {
        Counter(label: "revoker_attempts_total", factory: factory).increment()
    }

    /// A request was put back for a later attempt; `reason` is `transient` or `paused`.
    public func retryScheduled(reason: String) {
        Counter(label: "revoker_retries_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    /// One call to a provider, with its HTTP status (nil when none came back). Each provider
    /// has its own metric (`revoker_apple_request_duration_seconds`,
    /// `revoker_google_request_duration_seconds`): Apple's name predates the others, and
    /// dashboards built on it keep working.
    public func providerCall(_ provider: ProviderName, endpoint: String, status: Int?, duration: Duration) {
        Timer(
            label: "revoker_\(provider.rawValue)_request_duration_seconds",
            dimensions: [("endpoint", endpoint), ("status_class", Self.statusClass(status))],
            preferredDisplayUnit: .seconds,
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }

    /// Requests being processed by this process right now.
    /// The configured outbound rate per app (all processes together; `*` for the global one)
    /// and the calls per second this process made to each app.
    public func rates(configured: (perApp: [String: Double], global: Double?), observed: [String: Double]) {
        for (clientID, rate) in configured.perApp {
            Gauge(label: "revoker_provider_rate_limit_per_second", dimensions: [("client_id", clientID)], factory: factory).record(rate)
        }
        if let global = configured.global {
            Gauge(label: "revoker_provider_rate_limit_per_second", dimensions: [("client_id", "*")], factory: factory).record(global)
        }
        for clientID in Set(configured.perApp.keys).union(observed.keys) {
            Gauge(label: "revoker_provider_calls_per_second", dimensions: [("client_id", clientID)], factory: factory)
                .record(observed[clientID] ?? 0)
        }
    }

    public func inFlight(_ count: Int) {
        Gauge(label: "revoker_in_flight", factory: factory).record(count)
    }

    static func statusClass(_ status: Int?) -> String {
        guard let status, (100..<600).contains(status) else { return "none" }
        return "\(status / 100)xx"
    }
}
