import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerEvidence
import RevokerProvider
import RevokerStore
import RevokerWebhooks
import RevokerWorker

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show the queue: requests by state and outcome, the oldest due request, live workers, paused apps, webhooks, unsealed SQL intake and calls per second to providers.",
        discussion: """
            Reads PostgreSQL only (DATABASE_URL or "database_url"); Apple is not contacted. A growing oldest due \
            age means the workers are not keeping up or not running; a paused app has a configuration fault \
            (usually invalid_client) and waits for its next probe; unsealed intake counts credentials enqueued \
            through SQL that a worker has not sealed yet. Live workers are the worker processes (serve with its \
            worker, work, drain) holding their liveness lock now; a webhook's waiting time is the age of the \
            next event it has not received.

            Example:
              revoker status
              revoker status --json | jq '.by_state.pending'
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Flag(name: .customLong("json"), help: "Print one JSON object (snake_case keys, ISO 8601 UTC times) instead of a table.")
    var json = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.status", level: options.logLevel)
        let webhookApps = Dictionary(uniqueKeysWithValues: configuration.webhooks.map { ($0.name, $0.clientIDs) })
        let (statistics, paused, webhooks, observed, audit, workers) = try await withDatabase(configuration, logger: logger) { client in
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            let checkpoints = AuditCheckpoints(client: client, logger: logger)
            let deliveries = WebhookDeliveries(client: client, logger: logger)
            do {
                return (
                    try await queue.statistics(), try await queue.pausedApps(),
                    Webhooks(states: try await deliveries.states(), lag: try await deliveries.lag(of: webhookApps)),
                    try await queue.observedCallRates(),
                    AuditStatus(lastCheckpointAt: try await checkpoints.newest()?.createdAt, open: try await checkpoints.openTransactions()),
                    try await queue.liveWorkers()
                )
            } catch let error as RevokerStoreError {
                let current = (try? await Migrator(client: client, logger: logger).isCurrent()) ?? true
                if !current { throw fail("The database schema is not current: run `revoker migrate` first.") }
                throw fail("Could not read the queue: \(error.message).")
            }
        }
        let rates = CallRates(configuration: configuration, observed: observed)
        print(
            json
                ? Self.json(statistics, paused: paused, webhooks: webhooks, rates: rates, audit: audit, liveWorkers: workers)
                : Self.table(statistics, paused: paused, webhooks: webhooks, rates: rates, audit: audit, liveWorkers: workers),
            terminator: ""
        )
    }

    /// Each webhook endpoint's state, and how far behind it is (the age in seconds of the next
    /// event it has not received; only the configured endpoints).
    struct Webhooks {
        var states: [DeliveryState] = []
        var lag: [String: Double] = [:]

        var json: String {
            let lag = self.lag.sorted { $0.key < $1.key }.map { "\(WireFormat.jsonString($0.key)): \(String(format: "%.3f", $0.value))" }
            return "\"webhooks\": [\(states.map(\.json).joined(separator: ", "))],\n  \"webhook_lag_seconds\": {\(lag.joined(separator: ", "))}"
        }
    }

    /// The audit trail's checkpoints: when the last was signed, and which transactions keep
    /// their rows out of them.
    struct AuditStatus {
        var lastCheckpointAt: Date?
        var open: [OpenTransaction] = []

        var json: String {
            let open = self.open.map { transaction in
                let fields: [(String, String?)] = [
                    ("txid", String(transaction.txid)), ("pid", transaction.pid.map(String.init)),
                    ("role", transaction.role.map(WireFormat.jsonString)), ("application", transaction.application.map(WireFormat.jsonString)),
                    ("client_address", transaction.clientAddress.map(WireFormat.jsonString)),
                    ("state", transaction.state.map(WireFormat.jsonString)),
                    ("age_seconds", transaction.ageSeconds.map { String(format: "%.1f", $0) }),
                ]
                return "{" + fields.map { "\"\($0.0)\": \($0.1 ?? "null")" }.joined(separator: ", ") + "}"
            }
            let last = lastCheckpointAt.map { WireFormat.jsonString(WireFormat.timestamp($0)) } ?? "null"
            return "{\"last_checkpoint_at\": \(last), \"open_transactions\": [\(open.joined(separator: ", "))]}"
        }

        var table: String {
            var text =
                "Last audit checkpoint: "
                + (lastCheckpointAt.map { "\(WireFormat.timestamp($0)) (\(describe(-$0.timeIntervalSinceNow)) ago)" } ?? "none") + "\n"
            if !open.isEmpty {
                text += "Transactions held open (any audit rows they write wait for a later checkpoint):\n"
                for transaction in open { text += "  " + AuditExport.terminalSafe(transaction.summary, limit: 200) + "\n" }
            }
            return text
        }
    }

    /// Outbound calls per second: each app's limit and what the live workers made over the last ten seconds.
    struct CallRates {
        var global: Double?
        /// client_id, limit, observed; the configured apps and any app the workers called.
        var apps: [(clientID: String, limit: Double?, observed: Double)]

        init(configuration: RevokerConfiguration, observed: [String: Double]) {
            global = configuration.worker.maxRequestsPerSecond
            let limits = configuration.worker.appRequestsPerSecond
            let clientIDs = Set(configuration.clientIDsByProvider.values.joined()).union(limits.keys).union(observed.keys)
            apps = clientIDs.sorted().map { ($0, limits[$0], observed[$0] ?? 0) }
        }

        init() {
            apps = []
        }

        static func number(_ value: Double?) -> String {
            value.map { String(format: "%.1f", $0) } ?? "none"
        }

        var json: String {
            let entries = apps.map { app in
                "{\"client_id\": \(WireFormat.jsonString(app.clientID)), \"limit\": \(app.limit.map { "\($0)" } ?? "null"), \"observed\": \(String(format: "%.2f", app.observed))}"
            }
            return "{\"global_limit\": \(global.map { "\($0)" } ?? "null"), \"apps\": [\(entries.joined(separator: ", "))]}"
        }
    }

    /// Each provider with grants, and its count in every grant state.
    static func grantCounts(_ statistics: QueueStatistics) -> [(String, [(GrantState, Int)])] {
        Set(statistics.grants.keys.map(\.provider)).sorted().map { provider in
            (provider, GrantState.allCases.map { ($0, statistics.grants($0, provider: provider)) })
        }
    }

    static func outcomeCounts(_ statistics: QueueStatistics) -> [(RevocationOutcome, Int)] {
        RevocationOutcome.all.map { outcome in
            (outcome, statistics.byOutcome.filter { $0.key.outcome == outcome }.map(\.value).reduce(0, +))
        }
    }

    static func json(
        _ statistics: QueueStatistics,
        paused: [AppPause],
        webhooks: Webhooks = .init(),
        rates: CallRates = .init(),
        audit: AuditStatus = .init(),
        liveWorkers: Int? = nil
    ) -> String {
        let byState = RevocationState.all.map { "\(WireFormat.jsonString($0.rawValue)): \(statistics.byState[$0] ?? 0)" }
        let byOutcome = outcomeCounts(statistics).map { "\(WireFormat.jsonString($0.0.rawValue)): \($0.1)" }
        let pauses = paused.map { pause in
            [
                "\"client_id\": \(WireFormat.jsonString(pause.clientID))",
                "\"reason_code\": \(WireFormat.jsonString(pause.reason.code))",
                "\"reason_description\": \(pause.reason.description.map(WireFormat.jsonString) ?? "null")",
                "\"paused_at\": \(WireFormat.jsonString(WireFormat.timestamp(pause.pausedAt)))",
                "\"next_probe_at\": \(WireFormat.jsonString(WireFormat.timestamp(pause.nextProbeAt)))",
            ].joined(separator: ", ")
        }
        let grants = grantCounts(statistics).map { provider, counts in
            let states = counts.map { "\(WireFormat.jsonString($0.0.rawValue)): \($0.1)" }
            return "\(WireFormat.jsonString(provider)): {\(states.joined(separator: ", "))}"
        }
        return """
            {
              "by_state": {\(byState.joined(separator: ", "))},
              "by_outcome": {\(byOutcome.joined(separator: ", "))},
              "oldest_due_age_seconds": \(String(format: "%.3f", statistics.oldestDueAge.timeInterval)),
              "paused_apps": [\(pauses.map { "{\($0)}" }.joined(separator: ", "))],
              "unsealed_intake": \(statistics.unsealedIntake),
              "grants": {\(grants.joined(separator: ", "))},
              "pending_deletions": \(statistics.pendingDeletions),
              "writes_lost_last_day": \(statistics.writesLost),
              \(webhooks.json),
              "live_workers": \(liveWorkers.map(String.init) ?? "null"),
              "call_rates": \(rates.json),
              "audit": \(audit.json)
            }

            """
    }

    static func table(
        _ statistics: QueueStatistics,
        paused: [AppPause],
        webhooks: Webhooks = .init(),
        rates: CallRates = .init(),
        audit: AuditStatus = .init(),
        liveWorkers: Int? = nil
    ) -> String {
        var text = "Requests by state\n"
        for state in RevocationState.all {
            text += "  " + state.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0) + String(statistics.byState[state] ?? 0) + "\n"
        }
        text += "Final requests by outcome\n"
        for (outcome, count) in outcomeCounts(statistics) {
            text += "  " + outcome.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0) + String(count) + "\n"
        }
        let age = statistics.oldestDueAge.timeInterval
        text += "Oldest due request: " + (age > 0 ? "waiting \(describe(age))" : "none waiting") + "\n"
        if let liveWorkers { text += "Live workers: \(liveWorkers)\n" }
        text += "Unsealed SQL intake: \(statistics.unsealedIntake)\n"
        if statistics.writesLost > 0 {
            text += "WRITES LOST in a failover, last 24 hours: \(statistics.writesLost) (revoker audit --event write_lost; docs/runbook.md)\n"
        }
        let custody = grantCounts(statistics)
        if custody.isEmpty {
            text += "Grants in custody: none\n"
        } else {
            text +=
                "Grants in custody by provider and state (\(statistics.pendingDeletions) deletion\(statistics.pendingDeletions == 1 ? "" : "s") pending)\n"
            let rows =
                [["PROVIDER"] + GrantState.allCases.map { $0.rawValue.uppercased() }]
                + custody.map { provider, counts in [provider] + counts.map { String($0.1) } }
            text += aligned(rows)
        }
        if paused.isEmpty {
            text += "Paused apps: none\n"
        } else {
            text += "Paused apps: \(paused.count)\n"
            let rows =
                [["CLIENT ID", "REASON", "PAUSED SINCE", "NEXT PROBE"]]
                + paused.map { pause in
                    [
                        AuditExport.terminalSafe(pause.clientID, limit: 60), AuditExport.terminalSafe(pause.reason.code, limit: 40),
                        WireFormat.timestamp(pause.pausedAt), WireFormat.timestamp(pause.nextProbeAt),
                    ]
                }
            text += aligned(rows)
        }
        for webhook in webhooks.states {
            let state =
                if let parked = webhook.parkedSince {
                    "PARKED since \(WireFormat.timestamp(parked)) (\(webhook.attempts) failures, last \(webhook.lastStatus.map(String.init) ?? "no answer"); retrying)"
                } else if let failing = webhook.failingSince {
                    "failing since \(WireFormat.timestamp(failing)) (\(webhook.attempts) failures; next try \(WireFormat.timestamp(webhook.nextAttemptAt)))"
                } else {
                    "ok"
                }
            let behind = webhooks.lag[webhook.endpoint].map { $0 > 0 ? ", next event waiting \(describe($0))" : ", up to date" } ?? ""
            text += "Webhook \(webhook.endpoint): \(webhook.delivered) delivered, \(state)\(behind)\n"
        }
        if !rates.apps.isEmpty {
            text += "Calls to providers per second (limit for all workers; observed over the last 10 s)\n"
            let rows =
                [["CLIENT ID", "LIMIT", "OBSERVED"]]
                + rates.apps.map { [AuditExport.terminalSafe($0.clientID, limit: 60), CallRates.number($0.limit), CallRates.number($0.observed)] }
                + [["all apps", CallRates.number(rates.global), CallRates.number(rates.apps.map(\.observed).reduce(0, +))]]
            text += aligned(rows)
        }
        return text + audit.table
    }

    /// Rows in columns as wide as their widest cell, indented by two spaces.
    static func aligned(_ rows: [[String]]) -> String {
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            "  "
                + row.enumerated().map { $1.padding(toLength: widths[$0] + 2, withPad: " ", startingAt: 0) }.joined()
                .trimmingCharacters(in: .whitespaces) + "\n"
        }.joined()
    }

    static func describe(_ seconds: Double) -> String {
        switch seconds {
        case ..<120: String(format: "%.1f s", seconds)
        case ..<7200: String(format: "%.0f min", seconds / 60)
        case ..<172_800: String(format: "%.1f h", seconds / 3600)
        default: String(format: "%.1f days", seconds / 86_400)
        }
    }
}
