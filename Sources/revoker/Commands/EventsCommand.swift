import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerStore
import UnixSignals

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the events for app backends (final outcomes, Apple's notifications) as JSON lines, oldest first.",
        discussion: """
            Reads PostgreSQL only. Each line is one event, as GET /v1/events and webhooks carry it; its "cursor" \
            is what --after takes to continue. With --follow it keeps printing new events until SIGTERM or Ctrl-C.

            Examples:
              revoker events --limit 10
              revoker events --after 48213-977 --client-id com.example.app
              revoker events --follow | jq -c 'select(.type == "apple.account_deleted")'
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: ArgumentHelp("Start after this event's cursor (default: from the first event).", valueName: "cursor"))
    var after: String?

    @Option(name: .customLong("client-id"), help: "Only this app's events.")
    var clientID: String?

    @Option(help: "At most this many events (1-1000); with --follow, per read.")
    var limit = 100

    @Flag(help: "Keep printing new events as they are committed, until SIGTERM or Ctrl-C.")
    var follow = false

    func validate() throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000.") }
        if let after, EventCursor(after) == nil { throw ValidationError("--after must be an event's cursor, such as 48213-977.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.events", level: options.logLevel)
        let (start, clientIDs, limit, follow) = (after.flatMap(EventCursor.init), clientID.map { [$0] }, limit, follow)
        try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { client in
            let feed = EventFeed(client: client, logger: logger)
            guard follow else {
                Self.write(try await feed.events(after: start, clientIDs: clientIDs, limit: limit))
                return
            }
            // Trapped before saying so: a SIGTERM right after the line ends the command cleanly.
            let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            FileHandle.standardError.write(Data("revoker: following events; stop with Ctrl-C\n".utf8))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in signals { return }
                }
                group.addTask {
                    var cursor = start
                    while !Task.isCancelled {
                        let events = try await feed.events(after: cursor, clientIDs: clientIDs, limit: limit)
                        Self.write(events)
                        cursor = events.last?.cursor ?? cursor
                        if events.count < limit { try await Task.sleep(for: .milliseconds(500)) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// One line per event, written at once (standard output may be a pipe).
    static func write(_ events: [OutboxEvent]) {
        guard !events.isEmpty else { return }
        FileHandle.standardOutput.write(Data(events.map { $0.json + "\n" }.joined().utf8))
    }
}
