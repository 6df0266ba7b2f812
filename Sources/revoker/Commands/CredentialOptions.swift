import ArgumentParser

/// Where a command reads a code or token from: a file or standard input, never the command line.
struct CredentialOptions: ParsableArguments {
    @Option(
        name: .customLong("credential-file"),
        help: ArgumentHelp("Read the credential from this file (surrounding whitespace is ignored).", valueName: "path")
    )
    var file: String?

    @Flag(name: .customLong("credential-stdin"), help: "Read the credential from standard input.")
    var stdin = false

    /// Refuses anything but exactly one source (called by the command after its own checks).
    func check() throws {
        guard (file != nil) != stdin else {
            throw fail("Give the credential with exactly one of --credential-file PATH or --credential-stdin. Nothing was stored.")
        }
    }

    /// The credential, read within the store's limit.
    func read() throws -> String {
        try EnqueueCommand.readBoundedCredential(file: file, maximumBytes: EnqueueCommand.maximumCredentialBytes)
    }
}

/// Who the grant's user is, when the caller knows: their id at the provider, or the identity
/// token from the sign-in (verified, its sub taken).
struct UserOptions: ParsableArguments {
    @Option(
        name: [.customLong("user-id"), .customLong("apple-user-id")],
        help: ArgumentHelp(
            "The user's id at the provider (the id_token's sub), when known: a grant of another user is then never revoked.",
            valueName: "sub"
        )
    )
    var userID: String?

    @Option(
        name: .customLong("id-token-file"),
        help: ArgumentHelp(
            "Instead of --user-id: a file holding the user's identity token from the app's sign-in; Revoker verifies it and binds the grant to its sub.",
            valueName: "path"
        )
    )
    var idTokenFile: String?

    func check() throws {
        if idTokenFile != nil, userID != nil { throw fail("Name the user once: --user-id or --id-token-file. Nothing was stored.") }
    }
}
