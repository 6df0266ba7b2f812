import AppleSignInSandbox
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore

/// The first scene: a mix of deletions, each minted at its provider's sandbox and enqueued.
extension Demo {
    struct Scenario: Sendable {
        var reference: String
        var app: Int
        var kind: CredentialKind
        var story: String
        var expected: RevocationOutcome
        var redirectURI: String? = nil
        var userID: String? = nil
        var viaSQL = false
        var provider = ProviderName.apple
        var grantID = ""
        var secret = ""
    }

    /// The mix of deletions enqueued: an app backend's everyday cases and its mistakes.
    static let mix = [
        Scenario(reference: "user-1001", app: 0, kind: .authorizationCode, story: "code from the iOS app", expected: .revoked),
        Scenario(
            reference: "user-1002",
            app: 0,
            kind: .authorizationCode,
            story: "code from the web, bound to a redirect_uri",
            expected: .revoked,
            redirectURI: "https://notes.example.com/auth/apple/callback"
        ),
        Scenario(
            reference: "user-1003",
            app: 0,
            kind: .refreshToken,
            story: "stored refresh token, Apple user id given",
            expected: .revoked,
            userID: "000003.demo"
        ),
        Scenario(reference: "user-1004", app: 0, kind: .refreshToken, story: "stored refresh token", expected: .revoked),
        Scenario(reference: "user-1005", app: 0, kind: .accessToken, story: "only an access token was kept", expected: .revoked),
        Scenario(reference: "user-1006", app: 0, kind: .refreshToken, story: "user already revoked in Settings", expected: .alreadyInvalid),
        Scenario(
            reference: "user-1007",
            app: 0,
            kind: .refreshToken,
            story: "backend mixed up users: token of another Apple id",
            expected: .subjectMismatch,
            userID: "000999.someone-else"
        ),
        Scenario(
            reference: "user-1008",
            app: 0,
            kind: .authorizationCode,
            story: "code already exchanged at sign-in",
            expected: .codeRejected
        ),
        Scenario(reference: "acct-77", app: 1, kind: .refreshToken, story: "second app, stored refresh token", expected: .revoked),
        Scenario(
            reference: "acct-78",
            app: 1,
            kind: .refreshToken,
            story: "enqueued by SQL inside the app's own transaction",
            expected: .revoked,
            viaSQL: true
        ),
        Scenario(
            reference: "user-1001",
            app: 0,
            kind: .refreshToken,
            story: "the same account also signed in with Google",
            expected: .revoked,
            userID: "110000000000000001001",
            provider: .google
        ),
        Scenario(
            reference: "user-1009",
            app: 0,
            kind: .authorizationCode,
            story: "Google server auth code, never exchanged",
            expected: .revoked,
            provider: .google
        ),
        Scenario(
            reference: "user-1010",
            app: 0,
            kind: .refreshToken,
            story: "user removed the app's access to their Google account",
            expected: .alreadyInvalid,
            provider: .google
        ),
    ]

    /// Mints each scenario's grant at its sandbox and enqueues its deletion (one through SQL,
    /// inside a transaction); returns the scenarios with their grants and secrets.
    func enqueue(
        _ planned: [Scenario],
        configuration: RevokerConfiguration,
        sandbox: RunningSandbox,
        apple: [String],
        google: String
    ) async throws -> [Scenario] {
        let logger = self.logger
        let scenarios = try await RevokerApp(configuration: configuration, requireCurrentSchema: false, logger: logger).withRunning { running in
            try await RevokerApp.withProviders(configuration, logger: logger) { providers in
                var scenarios = planned
                let queue = RevocationQueue(client: running.database, sealer: configuration.sealer, logger: logger)
                for index in scenarios.indices where scenarios[index].provider == .google {
                    try await enqueueGoogle(&scenarios[index], index: index, clientID: google, queue: queue, sandbox: sandbox)
                }
                for index in scenarios.indices where scenarios[index].provider == .apple {
                    let clientID = apple[scenarios[index].app]
                    let app = providers.app(provider: .apple, clientID: clientID)
                    try await enqueueApple(
                        &scenarios[index],
                        index: index,
                        clientID: clientID,
                        app: app,
                        queue: queue,
                        database: running.database,
                        sandbox: sandbox
                    )
                }
                return scenarios
            }
        }
        section("3. Enqueued \(scenarios.count) deletions")
        for scenario in scenarios {
            output("   \(pad(scenario.reference, 10)) \(pad(scenario.provider.rawValue, 7)) \(pad(scenario.kind.rawValue, 19)) \(scenario.story)")
        }
        return scenarios
    }

    func enqueueGoogle(_ scenario: inout Scenario, index: Int, clientID: String, queue: RevocationQueue, sandbox: RunningSandbox) async throws {
        let subject = scenario.userID ?? "1100000000000000\(index)"
        let minted: SandboxAdmin.Minted =
            switch scenario.kind {
            case .authorizationCode: try await sandbox.google.mintCode(.init(clientID: clientID, subject: subject))
            default: try await sandbox.google.mintRefreshToken(clientID: clientID, subject: subject)
            }
        (scenario.grantID, scenario.secret) = (minted.grantID, minted.value)
        if scenario.expected == .alreadyInvalid {
            try await sandbox.withGoogleClient { try await $0.revoke(token: minted.value) }
        }
        _ = try await queue.enqueue(
            try NewRevocation(
                provider: scenario.provider.rawValue,
                clientID: clientID,
                externalReference: scenario.reference,
                userID: scenario.userID,
                credential: Credential(kind: scenario.kind, secret: minted.value)
            ),
            actor: "demo"
        )
    }

    /// An Apple scenario; `app` spends the code or revokes the token first when the scenario
    /// expects the backend to have done so.
    func enqueueApple(
        _ scenario: inout Scenario,
        index: Int,
        clientID: String,
        app: (any ProviderApp)?,
        queue: RevocationQueue,
        database: PostgresClient,
        sandbox: RunningSandbox
    ) async throws {
        let subject = scenario.userID.map { $0.contains("someone-else") ? "000007.demo" : $0 } ?? "0000\(index).demo"
        let minted: SandboxAdmin.Minted
        switch scenario.kind {
        case .authorizationCode:
            minted = try await sandbox.admin.mintCode(clientID: clientID, subject: subject, redirectURI: scenario.redirectURI)
        case .accessToken: minted = try await sandbox.admin.mintAccessToken(clientID: clientID, subject: subject)
        default: minted = try await sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
        }
        scenario.grantID = minted.grantID
        scenario.secret = minted.value
        switch scenario.expected {
        case .alreadyInvalid: try await app?.revoke(token: minted.value, kind: .refreshToken)
        case .codeRejected: _ = try await app?.exchange(code: minted.value, redirectURI: nil)
        default: break
        }
        if scenario.viaSQL {
            try await database.withTransaction(logger: logger) { [reference = scenario.reference, kind = scenario.kind] connection in
                // The app deletes its user and enqueues the revocation in one transaction.
                _ = try await connection.query(
                    "SELECT revoker.enqueue_revocation(\(clientID), \(reference), \(kind.rawValue), \(minted.value))",
                    logger: logger
                ).collect()
            }
        } else {
            _ = try await queue.enqueue(
                try NewRevocation(
                    clientID: clientID,
                    externalReference: scenario.reference,
                    userID: scenario.userID,
                    credential: Credential(kind: scenario.kind, secret: minted.value),
                    redirectURI: scenario.redirectURI
                ),
                actor: "demo"
            )
        }
    }
}
