import ArgumentParser
import Foundation
import RevokerApp
import RevokerProvider
import RevokerStore
import RevokerWorker

struct DrainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "drain",
        abstract: "Cron mode: process everything due now, wait for retries that fall due in time, then exit with a summary.",
        discussion: """
            Exit codes:
              0  every request it finished succeeded (revoked, or already invalid)
              1  some requests it finished failed (see the summary and `revoker audit`)
              2  could not run (configuration, database, or schema not migrated)
              3  stopped with requests still waiting: --max-duration ran out, or an app is paused

            Example:
              revoker drain --max-duration 600 --json
            """
    )

    @OptionGroup var options: ConfigurationOptions
    @OptionGroup var worker: WorkerOptions

    @Option(name: .customLong("max-duration"), help: "Seconds after which it stops claiming and hands back what is unfinished.")
    var maxDuration: Double = 900

    @Flag(help: "Print the summary as JSON.")
    var json = false

    func validate() throws {
        guard maxDuration > 0, maxDuration <= 86_400 else { throw ValidationError("--max-duration must be between 0 and 86400 seconds.") }
    }

    func run() async throws {
        var configuration = try loadConfiguration(options, needs: .all)
        worker.apply(to: &configuration.worker)
        let logger = CommandLogging.logger(
            label: "revoker.drain",
            level: options.logLevel,
            metadataProvider: configuration.tracing.loggingMetadataProvider
        )
        let started = ContinuousClock.now
        let deadline = started + .milliseconds(Int64(maxDuration * 1000))
        let report = try await runWorker(configuration, mode: .drain(deadline: deadline), logger: logger)
        print(json ? Self.json(report, elapsed: ContinuousClock.now - started) : Self.text(report, elapsed: ContinuousClock.now - started))
        throw Self.exitCode(for: report)
    }

    /// Judged by what the database holds at the end, not only by what this process claimed:
    /// a paused app's requests wait whether or not this run touched them. When the database
    /// cannot tell, the run is not taken for complete.
    static func exitCode(for report: WorkerReport) -> ExitCode {
        if report.failed > 0 { return Exit.someFailed }
        guard let remainder = report.remainder else { return Exit.incomplete }
        if report.timedOut || report.unfinished > 0 || !remainder.isEmpty { return Exit.incomplete }
        return Exit.success
    }

    /// Requests left waiting and those of them waiting for a paused app: the database's count,
    /// or this process's own when the database could not tell.
    static func leftWaiting(_ report: WorkerReport) -> (waiting: Int, paused: Int, pausedApps: Int?) {
        guard let remainder = report.remainder else { return (report.unfinished, report.paused, nil) }
        return (remainder.waiting, remainder.waitingForPausedApps, remainder.pausedApps)
    }

    static func text(_ report: WorkerReport, elapsed: Duration) -> String {
        let left = leftWaiting(report)
        var lines = [
            "Drained in \(String(format: "%.1f", elapsed.timeInterval)) s: "
                + "\(report.succeeded + report.failed) finished (\(report.succeeded) succeeded, \(report.failed) failed), "
                + "\(report.retriesScheduled) retries, \(left.waiting) left waiting (\(left.paused) for a paused app)"
                + (left.pausedApps.map { ", \($0) app\($0 == 1 ? "" : "s") paused" } ?? ", the queue could not be counted")
                + (report.timedOut ? ", time ran out" : "") + "."
        ]
        for (outcome, count) in report.finished.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append("  \(outcome.rawValue.padding(toLength: 18, withPad: " ", startingAt: 0))\(count)")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ report: WorkerReport, elapsed: Duration) -> String {
        let left = leftWaiting(report)
        let object: [String: Any] = [
            "succeeded": report.succeeded, "failed": report.failed, "retries_scheduled": report.retriesScheduled,
            "paused": left.paused, "paused_apps": left.pausedApps ?? NSNull(), "handed_back": report.released,
            "unfinished": left.waiting, "interrupted": report.interrupted, "timed_out": report.timedOut,
            "elapsed_ms": elapsed.milliseconds,
            "by_outcome": Dictionary(uniqueKeysWithValues: report.finished.map { ($0.key.rawValue, $0.value) }),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
