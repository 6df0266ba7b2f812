import AppleSignIn
import AppleSignInSandbox
import Foundation
import JWTKit
import ProviderSandbox
import RevokerLocalStack
import RevokerTesting
import Testing

@Suite("Identity token verification against the sandbox's published keys")
struct IdentityTokenTests {
    let clientID = "com.example.app"

    func withVerifier(_ body: (RunningSandbox, AppleIdentityTokenVerifier) async throws -> Void) async throws {
        try await RunningSandbox.with { sandbox in
            try await sandbox.withClient { client in
                try await body(sandbox, AppleIdentityTokenVerifier(client: client, minimumRefreshInterval: .zero))
            }
        }
    }

    func expectFailure(_ code: AppleSignInError.Code, _ verify: () async throws -> AppleIdentityClaims) async {
        await #expect {
            _ = try await verify()
        } throws: { error in
            (error as? AppleSignInError)?.code == code
        }
    }

    @Test func aGoodTokenVerifies() async throws {
        try await withVerifier { sandbox, verifier in
            let token = try await sandbox.admin.mintIdentityToken(.init(subject: "000123.abc", audience: clientID))
            let claims = try await verifier.verify(token, clientID: clientID)
            #expect(claims.subject.value == "000123.abc")
        }
    }

    @Test func wrongAudienceIssuerAndExpiryAreRefused() async throws {
        try await withVerifier { sandbox, verifier in
            let otherAudience = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: "com.example.other"))
            await expectFailure(.wrongAudience) { try await verifier.verify(otherAudience, clientID: clientID) }
            let otherIssuer = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID, issuer: "https://evil.example"))
            await expectFailure(.wrongIssuer) { try await verifier.verify(otherIssuer, clientID: clientID) }
            let expired = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID, expiresIn: -3600))
            await expectFailure(.expiredIdentityToken) { try await verifier.verify(expired, clientID: clientID) }
        }
    }

    @Test func aTamperedTokenFailsItsSignature() async throws {
        try await withVerifier { sandbox, verifier in
            let token = try await sandbox.admin.mintIdentityToken(.init(subject: "victim", audience: clientID))
            let other = try await sandbox.admin.mintIdentityToken(.init(subject: "attacker", audience: clientID))
            let parts = token.split(separator: ".")
            let otherParts = other.split(separator: ".")
            let spliced = [parts[0], otherParts[1], parts[2]].joined(separator: ".")
            await expectFailure(.invalidSignature) { try await verifier.verify(spliced, clientID: clientID) }
            await expectFailure(.malformedIdentityToken) { try await verifier.verify("not.a.jws", clientID: clientID) }
        }
    }

    @Test func aKeyPublishedAfterTheCacheWasFilledIsFetched() async throws {
        try await withVerifier { sandbox, verifier in
            let before = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID))
            _ = try await verifier.verify(before, clientID: clientID)
            let newKeyID = try await sandbox.admin.rotateKeys()
            let after = try await sandbox.admin.mintIdentityToken(.init(subject: "s2", audience: clientID))
            let header = try DefaultJWTParser().parse(Array(after.utf8), as: AppleIdentityClaims.self).header
            #expect(header.kid == newKeyID)
            #expect(try await verifier.verify(after, clientID: clientID).subject.value == "s2")
            #expect(try await verifier.verify(before, clientID: clientID).subject.value == "s", "old keys stay published")
        }
    }

    @Test func aKeyThatIsNeverPublishedIsUnknown() async throws {
        try await withVerifier { sandbox, verifier in
            let token = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID))
            var parts = token.split(separator: ".").map(String.init)
            parts[0] = Data(#"{"alg":"RS256","kid":"NOPE","typ":"JWT"}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            await expectFailure(.unknownSigningKey) { try await verifier.verify(parts.joined(separator: "."), clientID: clientID) }
        }
    }

    @Test(arguments: SandboxTokenBend.allCases)
    func aCriticalHeaderOrBytesAroundTheSignatureAreRefused(_ bend: SandboxTokenBend) async throws {
        try await withVerifier { sandbox, verifier in
            let bent = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID, bend: bend))
            await expectFailure(.malformedIdentityToken) { try await verifier.verify(bent, clientID: clientID) }
        }
    }

    @Test func anythingAfterTheSignatureIsRefused() async throws {
        try await withVerifier { sandbox, verifier in
            let token = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID))
            #expect(try await verifier.verify(token, clientID: clientID).subject.value == "s")
            for suffix in [" ", "\n", "\r\n", "\t", "=", "==", ".", "..", ".e30", "%3D", "\0"] {
                await #expect("suffix \(suffix.debugDescription)") {
                    _ = try await verifier.verify(token + suffix, clientID: clientID)
                } throws: { ($0 as? AppleSignInError)?.code == .malformedIdentityToken }
            }
            await expectFailure(.malformedIdentityToken) { try await verifier.verify(" " + token, clientID: clientID) }
        }
    }

    @Test func applesMaxAgeExpiresCachedKeysSoARetiredKeyStopsVerifying() async throws {
        try await RunningSandbox.with(configuration: .init(keysMaxAge: .zero)) { sandbox in
            try await sandbox.withClient { client in
                let keys = AppleKeySet(client: client, minimumRefreshInterval: .zero)
                let verifier = AppleIdentityTokenVerifier(keys: keys)
                let old = try await sandbox.admin.mintIdentityToken(.init(subject: "s", audience: clientID))
                #expect(try await verifier.verify(old, clientID: clientID).subject.value == "s")
                // Apple stops publishing the key: its max-age has passed, so the cache asks again.
                _ = try await sandbox.admin.rotateKeys(retire: true)
                await expectFailure(.unknownSigningKey) { try await verifier.verify(old, clientID: clientID) }
                let fresh = try await sandbox.admin.mintIdentityToken(.init(subject: "s2", audience: clientID))
                #expect(try await verifier.verify(fresh, clientID: clientID).subject.value == "s2")
                #expect(await keys.fetches == 3)
            }
        }
    }

    @Test func booleanAndStringFlagsBothDecode() throws {
        let base = #""iss":"https://appleid.apple.com","sub":"s","aud":"a","iat":1,"exp":2"#
        let strings = try JSONDecoder().decode(
            AppleIdentityClaims.self,
            from: Data(#"{\#(base),"email_verified":"true","is_private_email":"false"}"#.utf8)
        )
        let booleans = try JSONDecoder().decode(
            AppleIdentityClaims.self,
            from: Data(#"{\#(base),"email_verified":true,"is_private_email":false}"#.utf8)
        )
        #expect(strings.emailVerified?.value == true && strings.isPrivateEmail?.value == false)
        #expect(booleans.emailVerified?.value == true && booleans.isPrivateEmail?.value == false)
    }
}
