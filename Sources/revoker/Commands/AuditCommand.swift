import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerStore

extension AuditExportFormat: ExpressibleByArgument {}

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "The audit trail: its events (the default), its verification, checkpoints and public key.",
        discussion: """
            Examples:
              revoker audit --reference user-42
              revoker audit verify
              revoker audit receipt --reference user-42 > receipt.json
              revoker audit public-key > audit-public-key.pem
              revoker audit archive --before 2026-01 --out audit-before-2026-01.jsonl.gz
            """,
        subcommands: [
            AuditEventsCommand.self, AuditVerifyCommand.self, AuditReceiptCommand.self, AuditVerifyReceiptCommand.self,
            AuditCheckpointCommand.self, AuditPublicKeyCommand.self, AuditArchiveCommand.self, AuditVerifyArchiveCommand.self,
        ],
        defaultSubcommand: AuditEventsCommand.self
    )
}

struct AuditEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Show the audit trail: what happened to whose revocation, when, by whom, and what Apple answered.",
        discussion: """
            Prints matching audit events oldest first. Filters combine with AND. The trail never holds a token \
            or code, only facts: events, actors, Apple endpoints, HTTP statuses, Apple's error and its description.

            Examples:
              revoker audit --reference user-42
              revoker audit --client-id com.example.app --since 2026-01-01 \\
                --until 2026-02-01 --format csv > january.csv
              revoker audit --event revoked --event failed --format json --limit 50000

            CSV follows RFC 4180 (header row, CRLF); values starting with = + - @ get a leading ' so spreadsheets \
            do not run them as formulas. JSON is one array of objects with snake_case keys.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("request-id"), help: ArgumentHelp("Only events of this request (a UUID).", valueName: "uuid"))
    var requestID: String?

    @Option(
        name: .customLong("reference"),
        help: ArgumentHelp("Only events with this external reference (the app's account id).", valueName: "reference")
    )
    var reference: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("Only events of this app.", valueName: "client-id"))
    var clientID: String?

    @Option(name: .customLong("apple-user-id"), help: ArgumentHelp("Only events with this Apple user id (sub).", valueName: "sub"))
    var userID: String?

    @Option(
        name: .customLong("since"),
        help: ArgumentHelp("Only events at or after this time: ISO 8601, e.g. 2026-01-31T12:00:00Z or 2026-01-31 (UTC midnight).", valueName: "time")
    )
    var since: String?

    @Option(name: .customLong("until"), help: ArgumentHelp("Only events before this time (same forms as --since).", valueName: "time"))
    var until: String?

    @Option(
        name: .customLong("event"),
        help: ArgumentHelp(
            "Only events of this kind (repeatable): \(AuditEventKind.everyKnown.map(\.rawValue).joined(separator: ", ")).",
            valueName: "event"
        )
    )
    var events: [String] = []

    @Option(
        name: .customLong("limit"),
        help: ArgumentHelp("Print at most this many events (1-1000000); pages of 1000 are fetched as needed.", valueName: "n")
    )
    var limit = 1000

    @Option(name: .customLong("format"), help: ArgumentHelp("table (for terminals), json or csv.", valueName: "format"))
    var format: AuditExportFormat = .table

    func validate() throws {
        guard (1...1_000_000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000000.") }
        if let requestID, UUID(uuidString: requestID) == nil { throw ValidationError("--request-id must be a UUID.") }
        for (name, value) in [("--since", since), ("--until", until)] {
            if let value, Self.parseTime(value) == nil {
                throw ValidationError("\(name) must be ISO 8601, e.g. 2026-01-31T12:00:00Z, 2026-01-31T12:00:00.5+01:00 or 2026-01-31.")
            }
        }
        for event in events where !AuditEventKind.everyKnown.contains(where: { $0.rawValue == event }) {
            throw ValidationError(
                "--event '\(AuditExport.terminalSafe(event, limit: 40))' is not an event kind; known: \(AuditEventKind.everyKnown.map(\.rawValue).joined(separator: ", "))."
            )
        }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.audit", level: options.logLevel)
        let query = AuditQuery(
            requestID: requestID.flatMap(UUID.init(uuidString:)),
            externalReference: reference,
            clientID: clientID,
            userID: userID,
            from: since.flatMap(Self.parseTime),
            to: until.flatMap(Self.parseTime),
            events: events.isEmpty ? nil : events.compactMap { event in AuditEventKind.everyKnown.first { $0.rawValue == event } },
            limit: min(limit, 1000)
        )
        let limit = self.limit
        let format = self.format
        let (printed, more) = try await withDatabase(configuration, logger: logger) { client in
            do {
                return try await AuditExport.write(from: AuditLog(client: client, logger: logger), query: query, limit: limit, format: format) {
                    FileHandle.standardOutput.write(Data($0.utf8))
                }
            } catch let error as RevokerStoreError {
                let current = (try? await Migrator(client: client, logger: logger).isCurrent()) ?? true
                if !current { throw fail("The database schema is not current: run `revoker migrate` first.") }
                throw fail("Could not read the audit trail: \(error.message).")
            }
        }
        if more {
            FileHandle.standardError.write(
                Data("revoker: printed the first \(printed) matching events; more match (raise --limit or narrow the filters).\n".utf8)
            )
        }
    }

    /// ISO 8601 date-times with an offset (fractional seconds optional), or a bare date as UTC midnight.
    static func parseTime(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
        if let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle()) { return date }
        if trimmed.count == 10, let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle().year().month().day()) { return date }
        return nil
    }
}
