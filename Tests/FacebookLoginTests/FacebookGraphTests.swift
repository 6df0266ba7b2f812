import FacebookLogin
import FacebookLoginSandbox
import Foundation
import ProviderSandbox
import RevokerProvider
import Testing

/// The Graph API calls Facebook Login's server side makes, over real HTTP against the sandbox:
/// whose a token is, and the app's login removed for a person.
@Suite("Facebook Graph API")
struct FacebookGraphTests {
    typealias Harness = FacebookSandboxHarness
    static let user = "10229876543210001"

    @Test func debugTokenNamesTheAppAndThePersonOfALiveToken() async throws {
        try await Harness.with { harness in
            let signedIn = try await harness.admin.signIn(appID: Harness.appID, userID: Self.user)
            let info = try await harness.client.debugToken(signedIn.value, app: harness.app)
            #expect(info.isValid && info.appID == Harness.appID && info.userID == Self.user && info.type == "USER")
            #expect(try await harness.admin.grant(signedIn.grantID).validations == 1)

            // Another app's token is refused when asked about with this app's token.
            let theirs = try await harness.admin.signIn(appID: Harness.otherAppID, userID: Self.user)
            let refusal = try await #require(throws: ProviderFailure.self) { try await harness.client.debugToken(theirs.value, app: harness.app) }
            #expect(refusal.httpStatus == 400 && refusal.error == "graph_100", "\(refusal)")
            #expect(!refusal.description.contains(theirs.value) && !refusal.description.contains(Harness.secret))

            // A token Facebook never issued is answered, not valid.
            let unknown = try await harness.client.debugToken("EAAnot-a-token", app: harness.app)
            #expect(!unknown.isValid && unknown.userID == nil)
        }
    }

    @Test func removingTheLoginEndsEveryGrantOfThePersonAtTheAppOnce() async throws {
        try await Harness.with { harness in
            let first = try await harness.admin.signIn(appID: Harness.appID, userID: Self.user)
            let second = try await harness.admin.signIn(appID: Harness.appID, userID: Self.user)
            let elsewhere = try await harness.admin.signIn(appID: Harness.otherAppID, userID: Self.user)
            try await harness.client.removeLogin(userID: Self.user, app: harness.app)
            for grant in [first, second] {
                let report = try await harness.admin.grant(grant.grantID)
                #expect(report.revoked && report.revocations == 1)
            }
            #expect(try await harness.admin.grant(elsewhere.grantID).revoked == false, "another app's login stays")
            #expect(try await harness.client.debugToken(first.value, app: harness.app).isValid == false)

            // Asked again, Graph answers alike and nothing is revoked twice.
            try await harness.client.removeLogin(userID: Self.user, app: harness.app)
            let again = try await harness.admin.grant(first.grantID)
            #expect(again.revocations == 1 && again.revokeCalls == 2)
        }
    }

    /// Limited Login's uninstall ends the grant of a token Facebook issued to the app, even long
    /// expired; any other refusal ends the request and never blames the app's configuration (no
    /// app credential is sent), while throttling stays transient.
    @Test func uninstallEndsALimitedLoginGrantAndARefusalIsTheRequestsAlone() async throws {
        try await FacebookSandboxHarness.with { harness in
            let minted = try await harness.admin.limitedLoginToken(.init(appID: FacebookSandboxHarness.appID, subject: "7001"))
            let theirs = try await harness.admin.limitedLoginToken(.init(appID: FacebookSandboxHarness.otherAppID, subject: "7002"))
            try await harness.admin.advanceClock(by: 90 * 86_400)
            try await harness.client.uninstall(identityToken: minted.value, app: harness.app)
            let grant = try await harness.admin.grant(minted.grantID)
            #expect(grant.revoked && grant.revocations == 1 && grant.revokeCalls == 1, "\(grant)")

            for (token, name) in [("not.a.token", "a token Facebook never issued"), (theirs.value, "another app's token")] {
                let failure = await #expect(throws: ProviderFailure.self, "\(name)") {
                    try await harness.client.uninstall(identityToken: token, app: harness.app)
                }
                #expect(
                    failure?.classification == .requestRejected && failure?.endpoint == FacebookEndpoint.uninstall.rawValue,
                    "\(name): \(String(describing: failure))"
                )
                #expect(!(failure?.description.contains(token) ?? true), "\(name): the failure repeats nothing of the token")
            }
            #expect(try await harness.admin.grant(theirs.grantID).revoked == false)

            try await harness.admin.setFaults(SandboxFaults(throttleRate: 1, retryAfterSeconds: 3))
            let throttled = await #expect(throws: ProviderFailure.self) {
                try await harness.client.uninstall(identityToken: minted.value, app: harness.app)
            }
            #expect(throttled?.classification == .transient, "\(String(describing: throttled))")
        }
    }

    @Test func theAppsOwnCredentialsAreCheckedAndTheirFaultIsTheApps() async throws {
        try await Harness.with { harness in
            _ = try await harness.admin.signIn(appID: Harness.appID, userID: Self.user)
            let wrong = try FacebookApp(appID: Harness.appID, secret: FacebookAppSecret("ffffffffffffffffffffffffffffffff"))
            let refusal = try await #require(throws: ProviderFailure.self) { try await harness.client.removeLogin(userID: Self.user, app: wrong) }
            #expect(refusal.classification == .configurationFault && refusal.error == "graph_190", "\(refusal)")
            #expect(!refusal.description.contains("ffffffffffffffffffffffffffffffff"))
            #expect(refusal.errorDescription?.contains("Cannot parse access token") == true, "Graph's message is kept, bounded")
        }
    }

    @Test func throttlingAndOutagesAreTransient() async throws {
        try await Harness.with { harness in
            try await harness.admin.setFaults(SandboxFaults(unavailableRate: 1))
            let outage = try await #require(throws: ProviderFailure.self) {
                try await harness.client.removeLogin(userID: Self.user, app: harness.app)
            }
            #expect(outage.classification == .transient && outage.httpStatus == 503)
            try await harness.admin.setFaults(SandboxFaults(throttleRate: 1, retryAfterSeconds: 7))
            let throttled = try await #require(throws: ProviderFailure.self) {
                try await harness.client.removeLogin(userID: Self.user, app: harness.app)
            }
            #expect(throttled.classification == .transient && throttled.retryAfter == .seconds(7))
        }
    }

    @Test func graphErrorCodesAreClassifiedAsMetaDescribesThem() {
        for code in [1, 2, 4, 17, 32, 341, 368, 613] { #expect(FacebookClient.classify(graphCode: code, subcode: nil) == .transient, "\(code)") }
        for code in [10, 102, 190, 200, 299] { #expect(FacebookClient.classify(graphCode: code, subcode: nil) == .configurationFault, "\(code)") }
        #expect(FacebookClient.classify(graphCode: 100, subcode: nil) == .requestRejected)
    }

    @Test func appSecretProofIsTheHexHMACOfTheTokenKeyedWithTheSecret() throws {
        // Meta's example in PHP is hash_hmac('sha256', $access_token, $app_secret); this value is
        // Python's hmac.new(b'secret', b'token', hashlib.sha256).hexdigest().
        let proof = FacebookClient.appSecretProof(accessToken: "token", secret: try FacebookAppSecret("secret"))
        #expect(proof == "e941110e3d2bfe82621f0e3e1434730d7305d106c5f68c87165d0b27a4611a4a")
    }
}
