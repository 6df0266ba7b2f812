import AsyncHTTPClient
import FacebookLogin
import FacebookLoginSandbox
import Foundation
import Logging
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider

/// The Facebook sandbox served on a free loopback port, one registered app, and a client of
/// the Graph API and Limited Login's keys pointed at it.
struct FacebookSandboxHarness: Sendable {
    static let appID = "1234567890123456"
    static let otherAppID = "6543210987654321"
    static let secret = "0123456789abcdef0123456789abcdef"
    static let otherSecret = "fedcba9876543210fedcba9876543210"

    let baseURL: String
    let admin: FacebookSandboxAdmin
    let client: FacebookClient
    let app: FacebookApp
    let otherApp: FacebookApp

    static func with<T: Sendable>(
        configuration: FacebookSandbox.Configuration = .init(),
        _ body: (FacebookSandboxHarness) async throws -> T
    ) async throws -> T {
        let sandbox = try await FacebookSandbox(configuration: configuration)
        let logger = Logger(label: "revoker.facebook-sandbox", factory: { _ in SwiftLogNoOpLogHandler() })
        let httpClient = ProviderTransport.makeHTTPClient(extraTrustRoots: [])
        do {
            let serve = { sandbox.application(port: 0, logger: logger, onServerRunning: $0) }
            let result = try await withServingApplication(serve) { port in
                let baseURL = "http://127.0.0.1:\(port)"
                let admin = FacebookSandboxAdmin(baseURL: baseURL, httpClient: httpClient)
                try await admin.registerApp(appID: appID, appSecret: secret)
                try await admin.registerApp(appID: otherAppID, appSecret: otherSecret)
                let client = FacebookClient(
                    clients: ProviderHTTPClients([httpClient]),
                    configuration: .init(
                        graphBaseURL: baseURL,
                        limitedLoginKeysURL: baseURL + FacebookEndpoint.limitedLoginKeys.rawValue,
                        limitedLoginUninstallURL: baseURL + FacebookEndpoint.uninstall.rawValue
                    )
                )
                return try await body(
                    FacebookSandboxHarness(
                        baseURL: baseURL,
                        admin: admin,
                        client: client,
                        app: try FacebookApp(appID: appID, secret: FacebookAppSecret(secret)),
                        otherApp: try FacebookApp(appID: otherAppID, secret: FacebookAppSecret(otherSecret))
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
}
