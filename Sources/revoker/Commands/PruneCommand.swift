import ArgumentParser
import Foundation
import RevokerApp
import RevokerEvidence
import RevokerStore
import RevokerWebhooks

struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract:
            "Retention: delete final requests that finished, and events that occurred, more than --older-than-days ago; the audit trail is kept.",
        discussion: """
            Only succeeded, failed and cancelled requests are deleted, never pending or running ones. Their \
            credentials were already erased when they finished; their audit events stay, append-only, so \
            `revoker audit` still answers for them. Events in the outbox older than the period go too, but \
            only those every configured webhook endpoint has received; Apple's notifications are kept. Run it \
            from cron or a timer, e.g. daily.

            Example:
              revoker prune --older-than-days 90
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(
        name: .customLong("older-than-days"),
        help: ArgumentHelp("Delete requests that finished more than this many days ago (1-36500).", valueName: "days")
    )
    var olderThanDays: Int

    @Flag(help: #"Print {"pruned": N, "events_pruned": N, "finished_before": "…"} for scripts."#)
    var json = false

    func validate() throws {
        guard (1...36_500).contains(olderThanDays) else { throw ValidationError("--older-than-days must be between 1 and 36500.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.prune", level: options.logLevel)
        let cutoff = Date(timeIntervalSinceNow: -Double(olderThanDays) * 86_400)
        let (pruned, events) = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            let feed = EventFeed(client: client, logger: logger)
            do {
                return (
                    try await queue.prune(finishedBefore: cutoff),
                    try await feed.prune(occurredBefore: cutoff, keepingFor: configuration.webhooks.map(\.name))
                )
            } catch let error as RevokerStoreError {
                throw fail("Could not prune: \(error.message).")
            }
        }
        let finishedBefore = cutoff.formatted(.iso8601)
        if json {
            print(#"{"pruned": \#(pruned), "events_pruned": \#(events), "finished_before": \#(WireFormat.jsonString(finishedBefore))}"#)
        } else {
            print(
                "Pruned \(pruned) final request\(pruned == 1 ? "" : "s") that finished, and \(events) event\(events == 1 ? "" : "s") that occurred, "
                    + "before \(finishedBefore); the audit trail is untouched."
            )
        }
    }
}
