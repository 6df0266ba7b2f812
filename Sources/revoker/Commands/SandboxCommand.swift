import AppleSignIn
import AppleSignInSandbox
import ArgumentParser
import Foundation
import Hummingbird
import Logging

struct SandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox",
        abstract: "Run a local stand-in for appleid.apple.com, for testing an integration without Apple.",
        discussion: """
            Serves /auth/token, /auth/revoke and /auth/keys as Apple does, strictly, and an admin \
            surface under /sandbox/ to register apps, sign users in, inject faults and read back what \
            happened to each grant. The admin surface has no authentication: keep it on loopback.
            """
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free one).")
    var port = 8089

    @Option(name: .customLong("code-lifetime"), help: "Seconds an authorization code can be exchanged.")
    var codeLifetime = 300

    @Option(
        name: .customLong("register"),
        help: ArgumentHelp(
            "Register an app at start: CLIENT_ID,TEAM_ID,KEY_ID,P8_FILE (repeatable). Only the key's public half is kept.",
            valueName: "app"
        )
    )
    var registrations: [String] = []

    @Option(name: .customLong("internal-error-rate"), help: "Share of /auth calls answered 500.")
    var internalErrorRate = 0.0
    @Option(name: .customLong("unavailable-rate"), help: "Share of /auth calls answered 503.")
    var unavailableRate = 0.0
    @Option(name: .customLong("throttle-rate"), help: "Share of /auth calls answered 429.")
    var throttleRate = 0.0
    @Option(name: .customLong("retry-after"), help: "Retry-After seconds sent with a 429.")
    var retryAfter = 1
    @Option(name: .customLong("latency-ms"), help: "Milliseconds added to every /auth call.")
    var latencyMilliseconds = 0
    @Option(name: .customLong("hang-rate"), help: "Share of /auth calls never answered.")
    var hangRate = 0.0
    @Option(name: .customLong("drop-rate"), help: "Share of /auth calls whose connection is closed without an answer.")
    var dropRate = 0.0

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        if let problem = faults.problem { throw ValidationError("Fault settings: \(problem).") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
        guard codeLifetime > 0 else { throw ValidationError("--code-lifetime must be positive.") }
    }

    var faults: SandboxFaults {
        SandboxFaults(
            internalErrorRate: internalErrorRate,
            unavailableRate: unavailableRate,
            throttleRate: throttleRate,
            retryAfterSeconds: retryAfter,
            latencyMilliseconds: latencyMilliseconds,
            hangRate: hangRate,
            dropRate: dropRate
        )
    }

    func run() async throws {
        let logger = CommandLogging.logger(label: "revoker.sandbox", level: logLevel)
        let apps = try registrations.map(Self.parseRegistration)
        let sandbox = try await AppleSandbox(configuration: .init(codeLifetime: .seconds(codeLifetime), faults: faults))
        for app in apps { try await sandbox.register(app) }
        let application = sandbox.application(host: host, port: port, logger: logger) { [host] port in
            // Written unbuffered: scripts wait for this line on a pipe.
            FileHandle.standardOutput.write(Data("Apple sandbox listening on http://\(host):\(port)\n".utf8))
        }
        try await application.runService()
    }

    static func parseRegistration(_ value: String) throws -> SandboxAdmin.RegisterApp {
        let parts = value.split(separator: ",", maxSplits: 3).map(String.init)
        guard parts.count == 4 else {
            throw ValidationError("--register expects CLIENT_ID,TEAM_ID,KEY_ID,P8_FILE; got \(parts.count) parts.")
        }
        do {
            let key = try AppleSigningKey.load(contentsOfFile: parts[3])
            let app = try AppleApp(clientID: parts[0], teamID: parts[1], keyID: parts[2], signingKey: key)
            return .init(clientID: app.clientID, teamID: app.teamID, keyID: app.keyID, publicKeyPEM: key.publicKeyPEM)
        } catch {
            throw ValidationError(error.message)
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
