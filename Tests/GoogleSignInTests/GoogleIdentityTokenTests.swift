import AsyncHTTPClient
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import JWTKit
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import RevokerTesting
import Testing

@Suite("Google ID tokens are verified completely")
struct GoogleIdentityTokenTests {
    static let ios = "2000-ios.apps.googleusercontent.com"

    /// Verifies a token the sandbox minted as asked, for the app (whose audiences include the iOS client).
    func verify(
        _ sandbox: RunningSandbox,
        _ provider: GoogleProvider,
        _ app: GoogleProviderApp,
        _ request: GoogleSandboxAdmin.IdentityTokenRequest
    ) async throws -> GoogleIdentityClaims {
        let token = try await sandbox.google.mintIdentityToken(request)
        return try await provider.verifier.verify(token, audiences: app.app.audiences)
    }

    func withProvider(
        _ configuration: GoogleSandbox.Configuration = .init(),
        _ body: (RunningSandbox, GoogleProvider, GoogleProviderApp) async throws -> Void
    ) async throws {
        try await RunningSandbox.with(google: configuration) { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp(audiences: [Self.ios])
                let provider = GoogleProvider(apps: [app], client: client)
                try await body(sandbox, provider, try #require(provider.apps[app.clientID]))
            }
        }
    }

    @Test func aGenuineTokenOfAnyOfTheAppsClientsVerifiesInBothIssuerSpellings() async throws {
        try await withProvider { sandbox, provider, app in
            let web = try await verify(sandbox, provider, app, .init(subject: "u1", audience: [app.clientID]))
            #expect(web.googleUserID == "u1")
            let ios = try await verify(
                sandbox,
                provider,
                app,
                .init(
                    subject: "u2",
                    audience: [Self.ios],
                    issuer: "accounts.google.com",
                    email: "a@corp.example",
                    emailVerified: true,
                    emailVerifiedAsString: true,
                    hostedDomain: "corp.example"
                )
            )
            #expect(ios.googleUserID == "u2")
            #expect(ios.emailVerified?.value == true, "the string \"true\" decodes")
            #expect(ios.hostedDomain == "corp.example")
            let boolFalse = try await verify(sandbox, provider, app, .init(subject: "u3", audience: [app.clientID], emailVerified: false))
            #expect(boolFalse.emailVerified?.value == false)
            #expect(boolFalse.hostedDomain == nil)
            // Through the seam, as the API uses it.
            let token = try await sandbox.google.mintIdentityToken(.init(subject: "u4", audience: [Self.ios]))
            #expect(try await provider.verifyIdentityToken(token, clientID: app.clientID) == "u4")
        }
    }

    @Test(arguments: [
        (
            GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: ["9-other.apps.googleusercontent.com"]),
            GoogleSignInError.Code.wrongAudience
        ),
        (.init(subject: "u", audience: [GoogleIdentityTokenTests.ios, "9-other.apps.googleusercontent.com"]), .wrongAudience),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], issuer: "https://accounts.google.com.evil.example"), .wrongIssuer),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], issuer: "https://appleid.apple.com"), .wrongIssuer),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], expiresIn: -120), .expiredIdentityToken),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], expiresIn: 7200, issuedIn: 600), .issuedInFuture),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], signature: .unknownKey), .unknownSigningKey),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], signature: .forged), .invalidSignature),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], signature: .algorithmNone), .unsupportedAlgorithm),
        (.init(subject: "u", audience: ["1000-web.apps.googleusercontent.com"], signature: .hmacWithPublicKey), .unsupportedAlgorithm),
        (.init(subject: "", audience: ["1000-web.apps.googleusercontent.com"]), .malformedIdentityToken),
    ])
    func aTokenThatIsWrongInOneWayIsRefusedNamingIt(
        request: GoogleSandboxAdmin.IdentityTokenRequest,
        code: GoogleSignInError.Code
    ) async throws {
        try await withProvider { sandbox, provider, app in
            await #expect {
                try await verify(sandbox, provider, app, request)
            } throws: { ($0 as? GoogleSignInError)?.code == code }
            // Through the seam the code is kept and nothing of the token is echoed.
            let token = try await sandbox.google.mintIdentityToken(request)
            do {
                _ = try await provider.verifyIdentityToken(token, clientID: app.clientID)
                Issue.record("a bad token verified")
            } catch let rejected as IdentityTokenRejected {
                #expect(rejected.code == code.rawValue)
                #expect(!rejected.reason.contains(token.prefix(20)))
            }
        }
    }

    @Test func severalAudiencesNeedTheAppAsAuthorizedParty() async throws {
        try await withProvider { sandbox, provider, app in
            let both = [app.clientID, "9-other.apps.googleusercontent.com"]
            let claims = try await verify(sandbox, provider, app, .init(subject: "u", audience: both, authorizedParty: app.clientID))
            #expect(claims.googleUserID == "u")
            await #expect {
                try await verify(sandbox, provider, app, .init(subject: "u", audience: both, authorizedParty: "9-other.apps.googleusercontent.com"))
            } throws: { ($0 as? GoogleSignInError)?.code == .wrongAudience }
        }
    }

    @Test func aTamperedPayloadIsRefused() async throws {
        try await withProvider { sandbox, provider, app in
            let token = try await sandbox.google.mintIdentityToken(.init(subject: "victim", audience: [app.clientID]))
            var parts = token.split(separator: ".").map(String.init)
            let payload = try #require(Data(base64Encoded: Self.padded(parts[1])))
            let tampered = String(decoding: payload, as: UTF8.self).replacingOccurrences(of: "victim", with: "attacker")
            parts[1] = Data(tampered.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            await #expect {
                try await provider.verifier.verify(parts.joined(separator: "."), audiences: app.app.audiences)
            } throws: { ($0 as? GoogleSignInError)?.code == .invalidSignature }
            await #expect {
                try await provider.verifier.verify("not.a.jws", audiences: app.app.audiences)
            } throws: { ($0 as? GoogleSignInError)?.code == .malformedIdentityToken }
        }
    }

    static func padded(_ base64URL: String) -> String {
        let text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return text + String(repeating: "=", count: (4 - text.count % 4) % 4)
    }

    /// Verifies a token the sandbox mints for `request` with `verifier`.
    func verify(
        _ sandbox: RunningSandbox,
        _ verifier: GoogleIdentityTokenVerifier,
        _ app: GoogleApp,
        _ request: GoogleSandboxAdmin.IdentityTokenRequest
    ) async throws {
        _ = try await verifier.verify(try await sandbox.google.mintIdentityToken(request), audiences: app.audiences)
    }

    @Test func aKeyGooglesOwnAnswerNamesIsFetchedAtOnceWhateverTheInterval() async throws {
        try await RunningSandbox.with { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                let request = GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: [app.clientID])
                let keys = GoogleKeySet(client: client, minimumRefreshInterval: .seconds(600))
                let verifier = GoogleIdentityTokenVerifier(keys: keys)
                for _ in 0..<2 {
                    let token = try await sandbox.google.mintIdentityToken(request)
                    _ = try await verifier.verify(token, audiences: app.audiences, from: .providerAnswer)
                }
                #expect(await keys.keys.fetches == 1, "within max-age the cached keys serve")
                // Google rotates and retires the old key at once: its token endpoint's answers name the new one.
                _ = try await sandbox.google.rotateKeys(retire: true)
                let rotated = try await sandbox.google.mintIdentityToken(request)
                #expect(try await verifier.verify(rotated, audiences: app.audiences, from: .providerAnswer).googleUserID == "u")
                #expect(await keys.keys.fetches == 2)
                // A key Google does not list even in a fetch made after the answer came is unknown.
                let unlisted = try await sandbox.google.mintIdentityToken(
                    .init(subject: "u", audience: [app.clientID], signature: .unknownKey)
                )
                await #expect {
                    try await verifier.verify(unlisted, audiences: app.audiences, from: .providerAnswer)
                } throws: { ($0 as? GoogleSignInError)?.code == .unknownSigningKey }
                #expect(await keys.keys.fetches == 3)
            }
        }
    }

    @Test func aKeyATokenFromOutsideNamesWaitsForTheNextAllowedFetchAndAFloodMakesOne() async throws {
        try await RunningSandbox.with { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                let request = GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: [app.clientID])
                let clock = ManualClock()
                let keys = GoogleKeySet(
                    client: client,
                    minimumRefreshInterval: .seconds(600),
                    unknownKeyInterval: .seconds(3),
                    clock: ElapsedClock(clock)
                )
                let verifier = GoogleIdentityTokenVerifier(keys: keys)
                _ = try await verifier.verify(try await sandbox.google.mintIdentityToken(request), audiences: app.audiences)
                _ = try await sandbox.google.rotateKeys(retire: true)
                let rotated = try await sandbox.google.mintIdentityToken(request)
                let madeUp = try await sandbox.google.mintIdentityToken(.init(subject: "u", audience: [app.clientID], signature: .unknownKey))
                // Right after a fetch, a genuine token under the new key waits for the next allowed
                // fetch instead of being refused, and 30 made-up kids at once wait for the same one.
                let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask { (try? await verifier.verify(rotated, audiences: app.audiences)) != nil }
                    for _ in 0..<30 {
                        group.addTask {
                            do {
                                _ = try await verifier.verify(madeUp, audiences: app.audiences)
                                return true
                            } catch let error as GoogleSignInError where error.code == .unknownSigningKey {
                                return false
                            }
                        }
                    }
                    try await eventually("all 31 tokens wait for the next allowed fetch") { await keys.keys.waiting == 31 }
                    #expect(await keys.keys.fetches == 1, "no token fetched before the interval was over")
                    clock.advance(by: .milliseconds(2_999))
                    #expect(await keys.keys.fetches == 1)
                    clock.advance(by: .milliseconds(1))
                    return try await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(results.filter { $0 }.count == 1, "the genuine token verifies, none of the made-up ones")
                #expect(await keys.keys.fetches == 2, "one fetch for the whole flood")
            }
        }
    }

    @Test func aTokenFromOutsideIsToldToComeBackWhenTheNextFetchIsTooFarOff() async throws {
        try await RunningSandbox.with { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                let request = GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: [app.clientID])
                let keys = GoogleKeySet(client: client, minimumRefreshInterval: .seconds(600), unknownKeyInterval: .seconds(300))
                let verifier = GoogleIdentityTokenVerifier(keys: keys)
                _ = try await verifier.verify(try await sandbox.google.mintIdentityToken(request), audiences: app.audiences)
                _ = try await sandbox.google.rotateKeys()
                let rotated = try await sandbox.google.mintIdentityToken(request)
                await #expect {
                    try await verifier.verify(rotated, audiences: app.audiences)
                } throws: { error in
                    let failure = error as? ProviderFailure
                    return failure?.classification == .transient && (failure?.retryAfter ?? .zero) > .seconds(200)
                }
                #expect(await keys.keys.fetches == 1, "a flood of made-up kids costs Google nothing")
            }
        }
    }

    @Test func keysAreFetchedAgainOnceTheirMaxAgeHasPassedAndARetiredKeyStopsVerifying() async throws {
        try await RunningSandbox.with(google: .init(certsMaxAge: .seconds(1))) { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                let clock = ManualClock()
                // A max-age shorter than the interval is raised to it: the interval is the max-age's here.
                let keys = GoogleKeySet(client: client, minimumRefreshInterval: .seconds(1), clock: ElapsedClock(clock))
                let verifier = GoogleIdentityTokenVerifier(keys: keys)
                let request = GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: [app.clientID])
                try await verify(sandbox, verifier, app, request)
                clock.advance(by: .milliseconds(999))
                try await verify(sandbox, verifier, app, request)
                #expect(await keys.keys.fetches == 1, "within max-age the cached keys serve")
                clock.advance(by: .milliseconds(1))
                try await verify(sandbox, verifier, app, request)
                #expect(await keys.keys.fetches == 2)

                let old = try await sandbox.google.mintIdentityToken(request)
                _ = try await sandbox.google.rotateKeys(retire: true)
                clock.advance(by: .seconds(1))
                await #expect {
                    try await verifier.verify(old, audiences: app.audiences)
                } throws: { ($0 as? GoogleSignInError)?.code == .unknownSigningKey }
                #expect(await keys.keys.fetches == 3)
                #expect(try await sandbox.google.statistics().byOutcome["/oauth2/v3/certs 200 -"] == 3)
            }
        }
    }

    @Test func aZeroMaxAgeIsRaisedToTheMinimumInterval() async throws {
        try await RunningSandbox.with(google: .init(certsMaxAge: .zero)) { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                let keys = GoogleKeySet(client: client)
                let request = GoogleSandboxAdmin.IdentityTokenRequest(subject: "u", audience: [app.clientID])
                for _ in 0..<10 { try await verify(sandbox, GoogleIdentityTokenVerifier(keys: keys), app, request) }
                #expect(await keys.keys.fetches == 1)
                #expect(try await sandbox.google.statistics().byOutcome["/oauth2/v3/certs 200 -"] == 1)
            }
        }
    }

    @Test func failedFetchesAreSharedAndHeldOffWithBackoff() async throws {
        try await RunningSandbox.with { sandbox in
            try await sandbox.withGoogleClient { client in
                let app = try await sandbox.registerGoogleApp()
                try await sandbox.google.setKeyFaults(.init(unavailableRate: 1))
                let keys = GoogleKeySet(client: client)
                let token = try await sandbox.google.mintIdentityToken(.init(subject: "u", audience: [app.clientID]))
                let verifier = GoogleIdentityTokenVerifier(keys: keys)
                let failures = await withTaskGroup(of: Bool.self) { group in
                    for _ in 0..<50 {
                        group.addTask { await (try? verifier.verify(token, audiences: app.audiences)) == nil }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(failures == 50)
                // The keys are back, but the failure's interval holds: still no fetch.
                try await sandbox.google.setKeyFaults(.none)
                await #expect(throws: ProviderFailure.self) { try await verifier.verify(token, audiences: app.audiences) }
                #expect(await keys.keys.fetches == 1)
                #expect(
                    try await sandbox.google.statistics().byOutcome.filter { $0.key.hasPrefix("/oauth2/v3/certs") } == ["/oauth2/v3/certs 503 -": 1]
                )
            }
        }
        // How the pause grows with further failures: RevokerProviderTests' RS256KeySetTests.
    }

    @Test(arguments: [GoogleSandboxAdmin.Signature.criticalHeader, .paddedSignature, .trailingPeriod, .nonCanonicalSignature])
    func aCriticalHeaderOrBytesAroundTheSignatureAreRefused(_ signature: GoogleSandboxAdmin.Signature) async throws {
        try await withProvider { sandbox, provider, app in
            await #expect {
                _ = try await verify(sandbox, provider, app, .init(subject: "u", audience: [app.clientID], signature: signature))
            } throws: { ($0 as? GoogleSignInError)?.code == .malformedIdentityToken }
        }
    }

    @Test func keysThatCannotBeFetchedAreATransientFailure() async throws {
        try await RunningSandbox.with { sandbox in
            let configuration = GoogleClient.Configuration(
                oauthBaseURL: sandbox.googleBaseURL,
                certsURL: sandbox.googleBaseURL + "/no-such-certs",
                timeout: .seconds(10)
            )
            let app = try await sandbox.registerGoogleApp()
            let httpClient = sandbox.makeProviderHTTPClient()
            let client = GoogleClient(httpClient: httpClient, configuration: configuration)
            let provider = GoogleProvider(apps: [app], client: client)
            let token = try? await sandbox.google.mintIdentityToken(.init(subject: "u", audience: [app.clientID]))
            await #expect {
                try await provider.verifyIdentityToken(token ?? "", clientID: app.clientID)
            } throws: { error in
                // The sandbox answers 404 with no OAuth body: a proxy's page, so transient.
                (error as? ProviderFailure)?.classification == .transient && (error as? ProviderFailure)?.endpoint == "/oauth2/v3/certs"
            }
            try await httpClient.shutdown()
        }
    }
}
