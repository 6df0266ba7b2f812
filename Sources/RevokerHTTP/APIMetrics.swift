import CoreMetrics
import RevokerProvider
import RevokerStore

/// The API's metrics, through swift-metrics, into the registry that `/metrics` exports. Every
/// label is bounded: a route template, a method, a status, a state; never a concrete path.
public struct APIMetrics: Sendable {
    let factory: any MetricsFactory

    /// Metrics through `factory` (default: the process-wide `MetricsSystem` factory).
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// A request was enqueued through the API.
    func enqueued() {
        Counter(label: "revoker_requests_enqueued_total", dimensions: [("source", "http")], factory: factory).increment()
    }

    /// A message a provider pushed was handled: `result` is `accepted`, `duplicate`, or why it
    /// was refused (a verification error code, `malformed_body`, `unavailable`, …). `label` is the
    /// inbox's own counter (`revoker_apple_notifications_total`).
    func inboxMessage(_ label: String, result: String) {
        Counter(label: label, dimensions: [("result", result)], factory: factory).increment()
    }

    /// The queue as `revoker status` sees it; recorded when metrics are scraped.
    func queue(_ statistics: QueueStatistics) {
        for state in RevocationState.all {
            Gauge(label: "revoker_queue_depth", dimensions: [("state", state.rawValue)], factory: factory).record(statistics.byState[state] ?? 0)
        }
        Gauge(label: "revoker_oldest_due_age_seconds", factory: factory).record(statistics.oldestDueAge / .seconds(1))
        Gauge(label: "revoker_paused_apps", factory: factory).record(statistics.pausedApps)
        // Every state of every provider seen, so a count that drops to zero is recorded as zero.
        for provider in Set(statistics.grants.keys.map(\.provider)).union(["apple", "google"]) {
            for state in GrantState.allCases {
                Gauge(label: "revoker_grants", dimensions: [("provider", provider), ("state", state.rawValue)], factory: factory)
                    .record(statistics.grants[QueueStatistics.GrantCount(provider: provider, state: state)] ?? 0)
            }
        }
        Gauge(label: "revoker_account_deletions_pending", factory: factory).record(statistics.pendingDeletions)
    }

    /// Each webhook endpoint's state, recorded when metrics are scraped; endpoint names come
    /// from the configuration, so the label is bounded.
    func webhooks(_ states: [DeliveryState]) {
        for state in states {
            Gauge(label: "revoker_webhook_parked", dimensions: [("endpoint", state.endpoint)], factory: factory).record(
                state.parkedSince == nil ? 0 : 1
            )
            Gauge(label: "revoker_webhook_failures", dimensions: [("endpoint", state.endpoint)], factory: factory).record(state.attempts)
        }
    }

    /// One HTTP request served, by route template (never the concrete path), method and status.
    func httpRequest(route: String, method: String, status: Int, duration: Duration) {
        Timer(
            label: "revoker_http_request_duration_seconds",
            dimensions: [("route", route), ("method", method), ("status", "\(status)")],
            preferredDisplayUnit: .seconds,
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }
}
