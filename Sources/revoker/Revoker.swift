import ArgumentParser
import Foundation

@main
struct Revoker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoker",
        abstract: "Revokes a deleted account's Sign in with Apple and Sign in with Google grants.",
        discussion: """
            App backends enqueue a deletion; Revoker exchanges the stored authorization code or proves \
            the stored refresh token at the provider (Apple or Google), checks the grant is that user's, \
            revokes it, retries what is transient and records every step in an audit trail.
            """,
        subcommands: [
            MigrateCommand.self, EnqueueCommand.self, GrantsCommand.self, AccountsCommand.self, WorkCommand.self, DrainCommand.self,
            ServeCommand.self, StatusCommand.self,
            AuditCommand.self, CheckCommand.self, KeygenCommand.self, KeysCommand.self, APIKeyCommand.self, HealthCommand.self, SandboxCommand.self,
            PruneCommand.self, EventsCommand.self, DemoCommand.self, BenchCommand.self,
        ]
    )

    /// ArgumentParser's `main`, except that a parse error never repeats a command-line value:
    /// `--credential-stdin=<token>`, `--json=<token>` or `--log-level <token>` would print it.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            let message = self.message(for: error)
            let values = arguments.flatMap { argument in
                argument.hasPrefix("-") ? argument.split(separator: "=", maxSplits: 1).dropFirst().map(String.init) : [argument]
            }
            let echoed = values.filter { message.contains("'\($0)'") }
            if code != .success, !echoed.isEmpty {
                // Keep the message (it names the option), without the value, which may be a secret.
                let redacted = echoed.reduce(message) { $0.replacingOccurrences(of: "'\($1)'", with: "'<not shown>'") }
                FileHandle.standardError.write(Data("Error: \(redacted)\nSee 'revoker help'.\n".utf8))
                Foundation.exit(code.rawValue)
            }
            exit(withError: error)
        }
    }
}
