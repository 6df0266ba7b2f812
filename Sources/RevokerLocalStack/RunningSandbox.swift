import AppleSignIn
import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import Hummingbird
import Logging

/// A sandbox serving on a free loopback port for the duration of a closure.
public struct RunningSandbox: Sendable {
    /// The sandbox's base URL, to use as Apple's.
    public let baseURL: String
    /// Its admin surface over HTTP.
    public let admin: AppleSandboxAdmin

    /// Starts a sandbox, runs `body`, then stops it.
    public static func with<T: Sendable>(
        configuration: AppleSandbox.Configuration = .init(),
        _ body: (RunningSandbox) async throws -> T
    ) async throws -> T {
        let sandbox = try await AppleSandbox(configuration: configuration)
        let logger = Logger(label: "revoker.sandbox", factory: { _ in SwiftLogNoOpLogHandler() })
        let serve = { sandbox.application(port: 0, logger: logger, onServerRunning: $0) }
        return try await withServingApplication(serve) { port in
            let baseURL = "http://127.0.0.1:\(port)"
            return try await body(RunningSandbox(baseURL: baseURL, admin: AppleSandboxAdmin(baseURL: baseURL)))
        }
    }

    /// Generates a key, registers the app with the sandbox and returns it as Revoker would load it.
    public func registerApp(
        clientID: String = "com.example.app",
        teamID: String = "TEAM000001",
        keyID: String = "KEY0000001"
    ) async throws -> AppleApp {
        let key = P256.Signing.PrivateKey()
        try await admin.register(.init(clientID: clientID, teamID: teamID, keyID: keyID, publicKeyPEM: key.publicKey.pemRepresentation))
        return try AppleApp(clientID: clientID, teamID: teamID, keyID: keyID, signingKey: AppleSigningKey(key))
    }

    /// A client configuration pointing at this sandbox.
    /// The default timeout is generous: a test's call is about behaviour, not speed, and the whole
    /// suite can keep both cores busy for seconds.
    public func clientConfiguration(timeout: Duration = .seconds(30)) -> AppleClient.Configuration {
        AppleClient.Configuration(baseURL: baseURL, timeout: timeout)
    }
}

extension RunningSandbox {
    /// Runs `body` with an ``AppleClient`` pointed at this sandbox over a fresh connection pool.
    public func withClient<T>(timeout: Duration = .seconds(30), _ body: (AppleClient) async throws -> T) async throws -> T {
        let httpClient = AppleClient.makeHTTPClient()
        do {
            let result = try await body(AppleClient(httpClient: httpClient, configuration: clientConfiguration(timeout: timeout)))
            try await httpClient.shutdown()
            return result
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
    }

    /// Registers an app and returns a client that signs its secrets.
    public func appClient(_ client: AppleClient, clientID: String = "com.example.app") async throws -> AppleAppClient {
        AppleAppClient(client: client, signer: try await ClientSecretSigner(app: registerApp(clientID: clientID)))
    }
}
