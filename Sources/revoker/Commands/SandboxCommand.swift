import AppleSignIn
import AppleSignInSandbox
import ArgumentParser
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import Hummingbird
import Logging
import ProviderSandbox
import RevokerLocalStack

struct SandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox",
        abstract:
            "Run local stand-ins for Sign in with Apple, Google's OAuth endpoints and Facebook's Graph API, for testing an integration without them.",
        discussion: """
            Serves /auth/token, /auth/revoke and /auth/keys as Apple does, strictly; under /google \
            Google's /token, /revoke and /oauth2/v3/certs; under /facebook the Graph API's debug_token \
            and the removal of an app's login, and Limited Login's keys. Each has an admin surface \
            (/sandbox/, /google/sandbox/ and /facebook/sandbox/) to register apps, sign users in, inject \
            faults and read back what happened to each grant. The admin surfaces have no \
            authentication: keep them on loopback.
            """
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free one).")
    var port = 8089

    @Option(
        name: .customLong("https-authority-file"),
        help: ArgumentHelp(
            "Serve HTTPS with HTTP/2, as Apple and Google do, under a throw-away authority whose certificate is written to this file (give it to Revoker as extra_trust_roots_file).",
            valueName: "file"
        )
    )
    var httpsAuthorityFile: String?

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

    @Option(
        name: .customLong("register-google"),
        help: ArgumentHelp(
            "Register a Google OAuth client at start: CLIENT_ID,SECRET_FILE (repeatable).",
            valueName: "client"
        )
    )
    var googleRegistrations: [String] = []

    @Option(
        name: .customLong("register-facebook"),
        help: ArgumentHelp("Register a Facebook app at start: APP_ID,SECRET_FILE (repeatable).", valueName: "app")
    )
    var facebookRegistrations: [String] = []

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
        let clients = try googleRegistrations.map(Self.parseGoogleRegistration)
        let sandbox = try await AppleSandbox(configuration: .init(codeLifetime: .seconds(codeLifetime), faults: faults))
        for app in apps { try await sandbox.register(app) }
        let google = try await GoogleSandbox(configuration: .init(codeLifetime: .seconds(codeLifetime), faults: faults))
        for client in clients { try await google.register(clientID: client.clientID, clientSecret: client.secret.value) }
        let facebook: any MountableSandbox
        do {
            facebook = try await LocalProvider.facebookSandbox(faults: faults, registering: facebookRegistrations)
        } catch let error as SandboxRegistrationError {
            throw ValidationError(error.message)
        }
        let tls = try httpsAuthorityFile.map { file in
            let tls = try SandboxTLS()
            do {
                try Data(tls.authorityPEM.utf8).write(to: URL(fileURLWithPath: file))
            } catch {
                throw ValidationError("--https-authority-file: '\(file)' cannot be written.")
            }
            return tls
        }
        let scheme = tls == nil ? "http" : "https"
        let application = try sandbox.application(host: host, port: port, tls: tls, logger: logger, beside: google, facebook) { [host] port in
            // Written unbuffered: scripts wait for this line on a pipe.
            FileHandle.standardOutput.write(
                Data(
                    """
                    Apple sandbox listening on \(scheme)://\(host):\(port)
                    Google sandbox listening on \(scheme)://\(host):\(port)\(GoogleSandbox.prefix)
                    Facebook sandbox listening on \(scheme)://\(host):\(port)\(LocalProvider.facebook.path)

                    """.utf8
                )
            )
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

extension SandboxCommand {
    static func parseGoogleRegistration(_ value: String) throws -> (clientID: String, secret: GoogleClientSecret) {
        let parts = value.split(separator: ",", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            throw ValidationError("--register-google expects CLIENT_ID,SECRET_FILE; got \(parts.count) part\(parts.count == 1 ? "" : "s").")
        }
        guard GoogleApp.isClientID(parts[0]) else {
            throw ValidationError("--register-google: '\(parts[0].prefix(100))' is not a Google OAuth client ID (…apps.googleusercontent.com).")
        }
        do {
            return (parts[0], try GoogleClientSecret.load(contentsOfFile: parts[1], clientID: parts[0]))
        } catch let error as GoogleSignInError {
            throw ValidationError(error.message)
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
