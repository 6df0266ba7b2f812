import ArgumentParser

@main
struct Revoker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Revokes Sign in with Apple grants for deleted accounts.")
    func run() async throws {}
}
