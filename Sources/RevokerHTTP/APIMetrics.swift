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
        Gauge(label: "revoker_writes_lost", factory: factory).record(statistics.writesLost)
        // Final requests in the database by outcome, whichever process finished them (a cron
        // drain too): a count that grows is what the alerts on `exhausted` and `exchange_lost` read.
        for outcome in RevocationOutcome.all {
            let count = statistics.byOutcome.filter { $0.key.outcome == outcome }.map(\.value).reduce(0, +)
            Gauge(label: "revoker_requests_by_outcome", dimensions: [("outcome", outcome.rawValue)], factory: factory).record(count)
        }
    }

    /// Each app's pause, 1 while paused and 0 otherwise: every configured app (`apps`) and any
    /// app paused, so an alert can name the app. Recorded when metrics are scraped.
    func pauses(_ paused: [AppPause], apps: Set<String>) {
        let pausedApps = Set(paused.map(\.clientID))
        for clientID in apps.union(pausedApps) {
            Gauge(label: "revoker_app_paused", dimensions: [("client_id", clientID)], factory: factory).record(pausedApps.contains(clientID) ? 1 : 0)
        }
    }

    /// The workers alive now in every process (`revoker.workers` holding their liveness lock),
    /// not only this one's: an API without a worker reports them too.
    func workers(live: Int) {
        Gauge(label: "revoker_workers_live", factory: factory).record(live)
    }

    /// How far behind each webhook endpoint is: the age of the next event it has not received.
    func webhookLag(_ lag: [String: Double]) {
        for (endpoint, seconds) in lag {
            Gauge(label: "revoker_webhook_lag_seconds", dimensions: [("endpoint", endpoint)], factory: factory).record(seconds)
        }
    }

    /// How long the audit trail has gone unsigned; only where checkpoints are signed.
    func audit(_ lag: AuditSigningLag) {
        if let age = lag.lastCheckpointAge {
            Gauge(label: "revoker_audit_last_checkpoint_age_seconds", factory: factory).record(age)
        }
        Gauge(label: "revoker_audit_unsigned_age_seconds", factory: factory).record(lag.oldestUnsignedAge)
    }

    /// An inbox is open: its counter is exported from the start (at zero), so that the first
    /// refusals of a burst are counted as an increase.
    func inboxOpened(_ label: String) {
        for result in ["accepted", "duplicate"] {
            _ = Counter(label: label, dimensions: [("result", result)], factory: factory)
        }
    }

    /// One database call of an API request (``DatabaseDeadline``), `ok` or `error` (a timeout
    /// included), and how long it took.
    func databaseCall(succeeded: Bool, duration: Duration) {
        Timer(
            label: "revoker_database_call_duration_seconds",
            dimensions: [("caller", "api"), ("result", succeeded ? "ok" : "error")],
            preferredDisplayUnit: .seconds,
            factory: factory
        ).recordNanoseconds(duration.nanoseconds)
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
