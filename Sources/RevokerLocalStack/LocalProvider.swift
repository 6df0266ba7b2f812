import AppleSignInSandbox
import AsyncHTTPClient
import FacebookLogin
import FacebookLoginSandbox
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import ProviderSandbox
import RevokerProvider

/// One app laid out as an operator lays it out for its provider: its files, its entry in the
/// configuration file, and its registration with the provider's sandbox.
public protocol LocalApp: Sendable {
    var clientID: String { get }
    /// The JSON object for the configuration file's list of its provider's apps.
    var configurationEntry: [String: String] { get }
    /// The secrets in its files, line by line, to search captured output for.
    var secretTexts: [String] { get }
    /// Registers the app (its public key or secret) with its provider's sandbox.
    func register(with sandbox: RunningSandbox) async throws
}

/// A provider the local stack stands in for: where its sandbox serves, how its apps are laid out
/// and listed in the configuration file, and the environment that points Revoker at its sandbox.
/// A third provider is one more value in ``all``.
public struct LocalProvider: Sendable {
    public let name: ProviderName
    /// Where its sandbox's routes start below the sandboxes' base URL (empty at the root).
    public let path: String
    /// Where the configuration file lists its apps (`["apps"]`, `["google", "apps"]`).
    let appsKey: [String]
    /// Writes one app's files into a directory.
    let makeApp: @Sendable (_ clientID: String, _ directory: URL) throws -> any LocalApp
    /// The environment that points Revoker at its sandbox, served at the given base URL.
    let environment: @Sendable (_ baseURL: String) -> [String: String]
    /// A client of its sandbox's admin surface, served at the given base URL.
    let admin: @Sendable (_ baseURL: String, _ httpClient: HTTPClient) -> any SandboxAdminClient

    /// Every provider of the local stack, in the order their apps are written.
    public static let all: [LocalProvider] = [.apple, .google, .facebook]

    /// Apple's sandbox at the root; apps as a key file each, listed under `apps`.
    public static let apple = LocalProvider(
        name: .apple,
        path: "",
        appsKey: ["apps"],
        makeApp: { try LocalAppFiles(clientID: $0, directory: $1) },
        environment: { ["REVOKER_APPLE_BASE_URL": $0] },
        admin: { AppleSandboxAdmin(baseURL: $0, httpClient: $1) }
    )

    /// Google's sandbox under `/google`; apps as a secret file each, listed under `google.apps`.
    public static let google = LocalProvider(
        name: .google,
        path: GoogleSandbox.prefix,
        appsKey: ["google", "apps"],
        makeApp: { try LocalGoogleAppFiles(clientID: $0, directory: $1) },
        environment: { base in
            [
                "REVOKER_GOOGLE_OAUTH_BASE_URL": base, "REVOKER_GOOGLE_CERTS_URL": base + GoogleEndpoint.certs.rawValue,
                "REVOKER_GOOGLE_RISC_CONFIGURATION_URL": base + GoogleEndpoint.riscConfiguration.rawValue,
            ]
        },
        admin: { GoogleSandboxAdmin(baseURL: $0, httpClient: $1) }
    )

    /// Facebook's sandbox under `/facebook`; apps as a secret file each, listed under `facebook.apps`.
    public static let facebook = LocalProvider(
        name: .facebook,
        path: FacebookSandbox.prefix,
        appsKey: ["facebook", "apps"],
        makeApp: { try LocalFacebookAppFiles(appID: $0, directory: $1) },
        environment: { base in
            [
                "REVOKER_FACEBOOK_GRAPH_BASE_URL": base, "REVOKER_FACEBOOK_LIMITED_LOGIN_KEYS_URL": base + FacebookEndpoint.limitedLoginKeys.rawValue,
                "REVOKER_FACEBOOK_LIMITED_LOGIN_UNINSTALL_URL": base + FacebookEndpoint.uninstall.rawValue,
            ]
        },
        admin: { FacebookSandboxAdmin(baseURL: $0, httpClient: $1) }
    )
}

/// A Facebook app's id and secret file, as an operator lays them out.
public struct LocalFacebookAppFiles: LocalApp {
    public let appID: String
    /// The secret (to register with the sandbox, and to search captured output for).
    public let appSecret: String
    public let appSecretFile: String

    /// Makes a secret and writes it to `directory`.
    public init(appID: String, directory: URL) throws {
        self.appID = appID
        appSecret = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        appSecretFile = directory.appendingPathComponent("facebook-app-secret-\(appID)").path
        try writeSecret(appSecret + "\n", to: appSecretFile)
    }

    public var clientID: String { appID }

    /// The JSON object for the configuration file's `facebook.apps` list.
    public var configurationEntry: [String: String] { ["app_id": appID, "app_secret_file": appSecretFile] }

    public var secretTexts: [String] { [appSecret] }

    /// Registers the app and its secret with the Facebook sandbox.
    public func register(with sandbox: RunningSandbox) async throws {
        try await FacebookSandboxAdmin(baseURL: sandbox.baseURL + FacebookSandbox.prefix, httpClient: sandbox.httpClient)
            .registerApp(appID: appID, appSecret: appSecret)
    }
}
