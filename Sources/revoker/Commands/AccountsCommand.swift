import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerEvidence
import RevokerHTTP
import RevokerStore

struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "Accounts by your own reference: the grants held for one, its deletions, and deleting it.",
        discussion: """
            Examples:
              revoker accounts show --account-reference user-42
              revoker accounts delete --account-reference user-42 --wait 60
            """,
        subcommands: [AccountsShowCommand.self, AccountsDeleteCommand.self]
    )

    /// One grant on one line, never its token.
    static func line(_ grant: Grant, outcome: String? = nil) -> String {
        var text = "grant \(grant.id.uuidString.lowercased()): \(grant.provider) \(grant.clientID), \(grant.state.rawValue)"
        if let reason = outcome ?? grant.endReason, reason != grant.state.rawValue { text += " (\(reason))" }
        text += ", user \(grant.userID ?? "not known yet")"
        if let held = grant.heldAt { text += ", held since \(WireFormat.timestamp(held))" }
        if let validated = grant.validatedAt { text += ", validated \(WireFormat.timestamp(validated))" }
        if let ended = grant.endedAt { text += ", ended \(WireFormat.timestamp(ended))" }
        return text
    }

    /// A deletion and what became of each of its grants, for people.
    static func lines(_ deletion: AccountDeletion) -> [String] {
        let outcome = deletion.outcome.map { ", \($0.rawValue)" } ?? ""
        var lines = [
            "deletion \(deletion.id.uuidString.lowercased()) of \(deletion.accountReference): \(deletion.state.rawValue)\(outcome), "
                + "asked \(WireFormat.timestamp(deletion.requestedAt)) by \(deletion.requestedBy)"
        ]
        lines += zip(deletion.grants, deletion.grantOutcomes).map { "  " + line($0, outcome: $1) }
        lines += deletion.requests.filter { $0.grantID == nil }.map { request in
            "  request \(request.id.uuidString.lowercased()) for the credential it carried: \(request.state.rawValue)"
                + (request.outcome.map { " (\($0.rawValue))" } ?? "")
        }
        return lines
    }

    /// `value` as one line of JSON with sorted keys.
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

struct AccountsShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "The grants held for an account (every state, never a token) and its deletions."
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("account-reference"), help: ArgumentHelp("Your own id for the account.", valueName: "reference"))
    var accountReference: String

    @Flag(name: .customLong("json"), help: #"Print {"grants": […], "deletions": […]} as the API shows them."#)
    var json = false

    struct Account: Encodable {
        var grants: [GrantView]
        var deletions: [DeletionView]
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: .database)
        let logger = CommandLogging.logger(label: "revoker.accounts", level: options.logLevel)
        let (grants, deletions) = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) { [accountReference] client in
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            return (
                try await queue.custody.grants(accountReference: accountReference, limit: 1000),
                try await queue.deletions.ofAccount(accountReference, limit: 100)
            )
        }
        if json {
            print(try AccountsCommand.json(Account(grants: grants.map(GrantView.init), deletions: deletions.map(DeletionView.init))))
            return
        }
        print(
            "\(accountReference): \(grants.count) grant\(grants.count == 1 ? "" : "s"), \(deletions.count) deletion\(deletions.count == 1 ? "" : "s")"
        )
        for grant in grants { print("  " + AccountsCommand.line(grant)) }
        for deletion in deletions { print(AccountsCommand.lines(deletion).map { "  " + $0 }.joined(separator: "\n")) }
    }
}

struct AccountsDeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete an account by its reference alone: revoke every grant held for it.",
        discussion: """
            Each grant held for the account (every provider; only the apps named with --client-id when given) gets \
            one revocation request through the queue, which a running worker (`revoker work`, `serve`, `drain`) \
            carries out with the usual retries and audit trail. Asking again while the deletion runs returns it. \
            With --wait the command waits for the deletion to complete and prints each grant's fate.

            Examples:
              revoker accounts delete --account-reference user-42
              revoker accounts delete --account-reference user-42 --client-id com.example.app --wait 60 --json

            Exit codes: 0 asked (or completed: revoked, nothing_held); 1 completed incomplete (a grant is still \
            held: asking again retries it); 2 refused; 3 still pending when --wait ran out.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(name: .customLong("account-reference"), help: ArgumentHelp("Your own id for the account.", valueName: "reference"))
    var accountReference: String

    @Option(
        name: .customLong("client-id"),
        help: ArgumentHelp("Only this app's grants (repeat for several; default: every app).", valueName: "client-id")
    )
    var clientIDs: [String] = []

    @Option(name: .customLong("wait"), help: ArgumentHelp("Seconds to wait for the deletion to complete (default 0).", valueName: "seconds"))
    var wait: Double = 0

    @Flag(name: .customLong("json"), help: "Print the deletion as the API shows it (GET /v1/deletions/{id}), with \"created\".")
    var json = false

    struct Asked: Encodable {
        var created: Bool
        var deletion: DeletionView
    }

    func validate() throws {
        guard wait.isFinite, (0...3600).contains(wait) else { throw fail("--wait must be between 0 and 3600 seconds.") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: [.database, .apps])
        let configured = Set(configuration.clientIDsByProvider.values.joined())
        if let unknown = clientIDs.first(where: { !configured.contains($0) }) {
            throw fail(
                "--client-id \(unknown) is not a configured app (configured: \(configured.sorted().joined(separator: ", "))). Nothing was asked."
            )
        }
        let logger = CommandLogging.logger(label: "revoker.accounts", level: options.logLevel)
        let actor = EnqueueCommand.actor()
        let wait = Duration.milliseconds(Int(self.wait * 1000))
        let (deletion, created) = try await withDatabase(configuration, requireCurrentSchema: true, logger: logger) {
            [accountReference, clientIDs] client in
            let queue = RevocationQueue(client: client, sealer: configuration.sealer, logger: logger)
            let result: DeletionResult
            do {
                result = try await queue.deletions.request(
                    accountReference: accountReference,
                    clientIDs: clientIDs.isEmpty ? nil : clientIDs,
                    actor: actor
                )
            } catch let error as RevokerStoreError where error.code == .conflict || error.code == .invalidArgument {
                throw fail("\(error.message). Nothing was asked.")
            }
            let created = if case .created = result { true } else { false }
            return (try await queue.deletions.settled(result.deletion, within: wait), created)
        }
        if json {
            print(try AccountsCommand.json(Asked(created: created, deletion: DeletionView(deletion))))
        } else {
            print((created ? "Asked: " : "Already under way: ") + AccountsCommand.lines(deletion).joined(separator: "\n"))
        }
        if deletion.outcome == .incomplete { throw Exit.someFailed }
        if deletion.state == .pending, self.wait > 0 { throw Exit.incomplete }
    }
}
