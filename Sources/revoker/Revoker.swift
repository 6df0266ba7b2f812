import ArgumentParser

@main
struct Revoker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoker",
        abstract: "Revokes Sign in with Apple grants when accounts are deleted.",
        discussion: """
            App backends enqueue a deletion; Revoker signs a fresh client secret, exchanges the stored \
            authorization code or validates the stored refresh token at Apple, revokes it, retries what \
            is transient and records every step in an audit trail.
            """,
        subcommands: [
            MigrateCommand.self, SandboxCommand.self, EnqueueCommand.self, StatusCommand.self, AuditCommand.self, CheckCommand.self,
            KeygenCommand.self,
        ]
    )
}
