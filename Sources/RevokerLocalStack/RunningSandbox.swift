import AppleSignIn
import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import FacebookLoginSandbox
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import Hummingbird
import Logging
import NIOSSL
import ProviderSandbox
import RevokerProvider

/// How a sandbox is reached: as Apple and Google serve (HTTPS, HTTP/2 negotiated, a throw-away
/// authority the clients trust), or plain HTTP/1.1.
public enum SandboxTransport: String, Sendable, CaseIterable {
    case https
    case http1
}

/// The Apple sandbox at the root, the Google sandbox under `/google` and the Facebook sandbox
/// under `/facebook`, serving on a free loopback port for the duration of a closure.
public struct RunningSandbox: Sendable {
    /// The sandbox's base URL, to use as Apple's.
    public let baseURL: String
    /// Its admin surface over HTTP.
    public let admin: AppleSandboxAdmin
    /// The Google sandbox's admin surface over HTTP.
    public let google: GoogleSandboxAdmin
    public let transport: SandboxTransport
    /// The throw-away authority's certificate (over HTTPS), to trust as Revoker's
    /// `extra_trust_roots_file`; removed when the sandbox stops.
    public let trustRootsFile: String?
    /// Trusts the authority: for calls a test makes to the sandbox directly.
    public let httpClient: HTTPClient
    let authority: [NIOSSLCertificate]

    /// Where the Google sandbox's routes start, to use as Google's OAuth base URL.
    public var googleBaseURL: String { google.baseURL }
    /// The Google sandbox's key set, to use as Google's certs URL.
    public var googleCertsURL: String { google.baseURL + GoogleEndpoint.certs.rawValue }

    /// Starts the sandboxes, runs `body`, then stops them.
    public static func with<T: Sendable>(
        transport: SandboxTransport = .https,
        configuration: AppleSandbox.Configuration = .init(),
        google: GoogleSandbox.Configuration = .init(),
        _ body: (RunningSandbox) async throws -> T
    ) async throws -> T {
        let sandbox = try await AppleSandbox(configuration: configuration)
        let googleSandbox = try await GoogleSandbox(configuration: google)
        let facebookSandbox = try await FacebookSandbox()
        let logger = Logger(label: "revoker.sandbox", factory: { _ in SwiftLogNoOpLogHandler() })
        let tls = transport == .https ? try SandboxTLS() : nil
        let authority = try tls.map { [try $0.authorityCertificate()] } ?? []
        let trustRootsFile = tls.map { _ in
            FileManager.default.temporaryDirectory.appendingPathComponent("revoker-sandbox-ca-\(UUID().uuidString).pem").path
        }
        if let tls, let trustRootsFile {
            try Data(tls.authorityPEM.utf8).write(to: URL(fileURLWithPath: trustRootsFile))
        }
        defer { if let trustRootsFile { try? FileManager.default.removeItem(atPath: trustRootsFile) } }
        let httpClient = ProviderTransport.makeHTTPClient(extraTrustRoots: authority)
        let serve = { try sandbox.application(port: 0, tls: tls, logger: logger, beside: googleSandbox, facebookSandbox, onServerRunning: $0) }
        do {
            let result = try await withServingApplication(serve) { port in
                let baseURL = "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)"
                return try await body(
                    RunningSandbox(
                        baseURL: baseURL,
                        admin: AppleSandboxAdmin(baseURL: baseURL, httpClient: httpClient),
                        google: GoogleSandboxAdmin(baseURL: baseURL + GoogleSandbox.prefix, httpClient: httpClient),
                        transport: transport,
                        trustRootsFile: trustRootsFile,
                        httpClient: httpClient,
                        authority: authority
                    )
                )
            }
            try await httpClient.shutdown()
            return result
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
    }

    /// The admin surface of `provider`'s sandbox, for the calls every sandbox answers alike.
    public func admin(for provider: ProviderName) -> any SandboxAdminClient {
        guard let local = LocalProvider.all.first(where: { $0.name == provider }) else {
            preconditionFailure("the local stack has no sandbox for \(provider)")
        }
        return local.admin(baseURL + local.path, httpClient)
    }

    /// The sandbox's throw-away authority (over HTTPS), for a client to trust.
    public func authorityCertificate() throws -> NIOSSLCertificate {
        guard let certificate = authority.first else { throw SandboxNotHTTPS() }
        return certificate
    }

    /// A pooled client for providers, as Revoker makes one, trusting the sandbox's authority.
    public func makeProviderHTTPClient() -> HTTPClient {
        ProviderTransport.makeHTTPClient(extraTrustRoots: authority)
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
        let httpClient = makeProviderHTTPClient()
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

extension RunningSandbox {
    /// Registers a Google OAuth client with a fresh secret and returns it as Revoker would load it.
    public func registerGoogleApp(
        clientID: String = "1000-web.apps.googleusercontent.com",
        audiences: [String] = []
    ) async throws -> GoogleApp {
        let secret = "GOCSPX-" + UUID().uuidString
        try await google.register(clientID: clientID, clientSecret: secret)
        return try GoogleApp(clientID: clientID, clientSecret: GoogleClientSecret(secret), audiences: audiences)
    }

    /// A Google client configuration pointing at this sandbox.
    public func googleConfiguration(timeout: Duration = .seconds(30)) -> GoogleClient.Configuration {
        GoogleClient.Configuration(
            oauthBaseURL: googleBaseURL,
            certsURL: googleCertsURL,
            riscConfigurationURL: googleBaseURL + GoogleEndpoint.riscConfiguration.rawValue,
            timeout: timeout
        )
    }

    /// Runs `body` with a ``GoogleClient`` pointed at this sandbox over a fresh connection pool.
    public func withGoogleClient<T>(timeout: Duration = .seconds(30), _ body: (GoogleClient) async throws -> T) async throws -> T {
        let httpClient = makeProviderHTTPClient()
        do {
            let result = try await body(GoogleClient(httpClient: httpClient, configuration: googleConfiguration(timeout: timeout)))
            try await httpClient.shutdown()
            return result
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
    }
}

/// The sandbox serves plain HTTP/1.1: it has no authority to trust.
public struct SandboxNotHTTPS: Error {}
