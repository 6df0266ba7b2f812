import FacebookLogin
import FacebookLoginSandbox
import Foundation
import JWTKit
import ProviderSandbox
import RevokerProvider
import Testing

/// Limited Login's authentication tokens, verified completely against the keys the sandbox
/// publishes over HTTP: a genuine one passes, each claim forged in turn is refused, and a key
/// rotation is followed.
@Suite("Facebook Limited Login tokens")
struct LimitedLoginTests {
    typealias Harness = FacebookSandboxHarness
    typealias Token = FacebookSandboxAdmin.LimitedLoginTokenRequest
    static let user = "10229876543210001"

    @Test func aGenuineTokenVerifiesWithItsNonceAndNamesThePerson() async throws {
        try await Harness.with { harness in
            let verifier = LimitedLoginVerifier(client: harness.client)
            let minted = try await harness.admin.limitedLoginToken(Token(appID: Harness.appID, subject: Self.user, nonce: "n-0S6_WzA2Mj"))
            let claims = try await verifier.verify(minted.value, appID: Harness.appID, nonce: "n-0S6_WzA2Mj")
            #expect(claims.subject.value == Self.user && claims.nonce == "n-0S6_WzA2Mj")
            // Without a nonce to compare, the rest is still checked and passes.
            #expect(try await verifier.verify(minted.value, appID: Harness.appID).subject.value == Self.user)
            #expect(!minted.grantID.isEmpty, "a genuine sign-in is a grant at the sandbox")
        }
    }

    @Test func eachForgedClaimAndSignatureIsRefusedForItsReason() async throws {
        try await Harness.with { harness in
            let verifier = LimitedLoginVerifier(client: harness.client)
            let cases: [(String, Token, FacebookLoginError.Code)] = [
                ("another issuer", Token(appID: Harness.appID, subject: Self.user, issuer: "https://accounts.google.com"), .wrongIssuer),
                ("another app's audience", Token(appID: Harness.appID, subject: Self.user, audience: Harness.otherAppID), .wrongAudience),
                ("expired", Token(appID: Harness.appID, subject: Self.user, expiresIn: -120), .expiredIdentityToken),
                ("issued in the future", Token(appID: Harness.appID, subject: Self.user, issuedIn: 600), .issuedInFuture),
                ("another nonce", Token(appID: Harness.appID, subject: Self.user, nonce: "replayed"), .wrongNonce),
                ("a forged signature", Token(appID: Harness.appID, subject: Self.user, signature: .forged), .invalidSignature),
                ("an unpublished key", Token(appID: Harness.appID, subject: Self.user, signature: .unknownKey), .unknownSigningKey),
                ("alg none", Token(appID: Harness.appID, subject: Self.user, signature: .algorithmNone), .unsupportedAlgorithm),
                (
                    "HS256 keyed with the public key", Token(appID: Harness.appID, subject: Self.user, signature: .hmacWithPublicKey),
                    .unsupportedAlgorithm
                ),
                (
                    "padding after the signature", Token(appID: Harness.appID, subject: Self.user, signature: .paddedSignature),
                    .malformedIdentityToken
                ),
                ("a crit header", Token(appID: Harness.appID, subject: Self.user, signature: .criticalHeader), .malformedIdentityToken),
            ]
            for (name, request, code) in cases {
                let minted = try await harness.admin.limitedLoginToken(request)
                do {
                    _ = try await verifier.verify(minted.value, appID: Harness.appID, nonce: request.nonce == nil ? nil : "the-sign-in's")
                    Issue.record("\(name) was accepted")
                } catch let error as FacebookLoginError {
                    #expect(error.code == code, "\(name): \(error.message)")
                }
            }
            // A genuine token of another app is refused for this one.
            let theirs = try await harness.admin.limitedLoginToken(Token(appID: Harness.otherAppID, subject: Self.user))
            await #expect(throws: FacebookLoginError.self) { try await verifier.verify(theirs.value, appID: Harness.appID) }
        }
    }

    /// The unknown-key guard stops a token under a key nobody publishes (above) and still lets
    /// through a token under a key Facebook just started publishing.
    @Test func aTokenUnderAJustRotatedKeyVerifies() async throws {
        try await Harness.with { harness in
            let verifier = LimitedLoginVerifier(client: harness.client, minimumRefreshInterval: .seconds(3600))
            let before = try await harness.admin.limitedLoginToken(Token(appID: Harness.appID, subject: Self.user))
            _ = try await verifier.verify(before.value, appID: Harness.appID)
            _ = try await harness.admin.rotateKeys(retire: true)
            let after = try await harness.admin.limitedLoginToken(Token(appID: Harness.appID, subject: Self.user))
            // The first token from outside naming the new key may wait for one fetch; it then verifies.
            var verified = false
            for _ in 0..<20 where !verified {
                do {
                    verified = try await verifier.verify(after.value, appID: Harness.appID).subject.value == Self.user
                } catch let failure as ProviderFailure {
                    try await Task.sleep(for: failure.retryAfter ?? .milliseconds(500))
                }
            }
            #expect(verified)
            let fetches = try await harness.admin.statistics().byOutcome.filter { $0.key.hasPrefix(FacebookEndpoint.limitedLoginKeys.rawValue + " ") }
            #expect(fetches.values.reduce(0, +) <= 3, "fetched on need, not per token: \(fetches)")
        }
    }
}
