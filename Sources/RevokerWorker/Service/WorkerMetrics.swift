import CoreMetrics
import RevokerProvider
import RevokerStore

/// The worker's metrics, through swift-metrics: the factory is injected so that each server (and
/// each test) can export its own registry. Every label is bounded: outcomes, endpoints, status
/// classes, providers and configured apps (a request names a configured app or is refused at
/// enqueue); never a message, an id or another client-supplied value.
public struct WorkerMetrics: Sendable {
    let factory: any MetricsFactory

    /// Metrics through `factory` (default: the process-wide `MetricsSystem` factory, a no-op
    /// until bootstrapped).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// A request of `provider`'s app `clientID` ended with `outcome`. The app is bounded: a
    /// request names a configured app or is refused at enqueue.
    public func finished(_ outcome: RevocationOutcome, provider: String, clientID: String) {
        Counter(
            label: "revoker_requests_finished_total",
            dimensions: [("outcome", outcome.rawValue), ("provider", provider), ("client_id", clientID)],
            factory: factory
        ).increment()
    }

    /// A worker claimed a request: one attempt starts.
    public func attemptStarted(provider: String, clientID: String) {
        Counter(label: "revoker_attempts_total", dimensions: [("provider", provider), ("client_id", clientID)], factory: factory).increment()
    }

    /// A request was put back for a later attempt; `reason` is `transient`, `paused` or `rate_limit`.
    public func retryScheduled(reason: String, provider: String, clientID: String) {
        Counter(
            label: "revoker_retries_total",
            dimensions: [("reason", reason), ("provider", provider), ("client_id", clientID)],
            factory: factory
        ).increment()
    }

    /// One database call of the pipeline, `ok` or `error` (a timeout included), and how long it took.
    public func databaseCall(succeeded: Bool, duration: Duration) {
        Timer(
            label: "revoker_database_call_duration_seconds",
            dimensions: [("caller", "worker"), ("result", succeeded ? "ok" : "error")],
            preferredDisplayUnit: .seconds,
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
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
