import AsyncHTTPClient
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import JWTKit
import NIOCore
import NIOHTTP1
import ProviderSandbox
import RevokerLocalStack
import RevokerProvider
import Testing

/// Runs `body` with the sandboxes, a Google client against them and a registered app.
func withGoogle<T: Sendable>(
    configuration: GoogleSandbox.Configuration = .init(),
    audiences: [String] = [],
    _ body: (RunningSandbox, GoogleClient, GoogleProviderApp) async throws -> T
) async throws -> T {
    try await RunningSandbox.with(google: configuration) { sandbox in
        try await sandbox.withGoogleClient { client in
            let app = try await sandbox.registerGoogleApp(audiences: audiences)
            let provider = GoogleProvider(apps: [app], client: client)
            let providerApp = try #require(provider.apps[app.clientID])
            return try await body(sandbox, client, providerApp)
        }
    }
}

/// Whether `error` is a provider failure with this classification, status and error code.
func isFailure(_ error: any Error, _ classification: ProviderFailure.Classification, status: Int?, code: String? = nil) -> Bool {
    guard let failure = error as? ProviderFailure else { return false }
    return failure.classification == classification && failure.httpStatus == status && (code == nil || failure.error == code)
}

@Suite("Google's token and revoke endpoints, against the sandbox over HTTP")
struct GoogleProtocolTests {
    @Test func aCodeIsExchangedOnceAndItsGrantRevokedOnce() async throws {
        try await withGoogle { sandbox, _, app in
            let code = try await sandbox.google.mintCode(.init(clientID: app.clientID, subject: "110169484474386276334"))
            let proof = try await app.exchange(code: code.value, redirectURI: nil)
            #expect(proof.identity == .verified(subject: "110169484474386276334"))
            let refreshToken = try #require(proof.refreshToken)
            #expect(proof.accessToken != nil)

            await #expect {
                try await app.exchange(code: code.value, redirectURI: nil)
            } throws: { isFailure($0, .credentialRejected, status: 400, code: "invalid_grant") }

            try await app.revoke(token: refreshToken, kind: .refreshToken)
            // Google's revoke is not idempotent in its answer: the second call says invalid_token.
            await #expect {
                try await app.revoke(token: refreshToken, kind: .refreshToken)
            } throws: { isFailure($0, .credentialRejected, status: 400, code: "invalid_token") }
            let grant = try await sandbox.google.grant(code.grantID)
            #expect(grant.codeExchanges == 1)
            #expect(grant.rejectedCodeExchanges == 1)
            #expect(grant.revocations == 1)
            #expect(grant.revokeCalls == 2)
        }
    }

    @Test func aCodeIsBoundToItsRedirectURIAndOfflineAccessDecidesTheRefreshToken() async throws {
        try await withGoogle { sandbox, _, app in
            let bound = try await sandbox.google.mintCode(.init(clientID: app.clientID, subject: "u1", redirectURI: "https://example.com/cb"))
            await #expect {
                try await app.exchange(code: bound.value, redirectURI: "https://example.com/other")
            } throws: { isFailure($0, .requestRejected, status: 400, code: "redirect_uri_mismatch") }
            let proof = try await app.exchange(code: bound.value, redirectURI: "https://example.com/cb")
            #expect(proof.refreshToken != nil)

            let online = try await sandbox.google.mintCode(.init(clientID: app.clientID, subject: "u1", offline: false))
            let onlineProof = try await app.exchange(code: online.value, redirectURI: nil)
            #expect(onlineProof.refreshToken == nil)
            // An access token ends the whole grant too.
            try await app.revoke(token: try #require(onlineProof.accessToken), kind: .accessToken)
            #expect(try await sandbox.google.grant(online.grantID).revoked)
        }
    }

    @Test func aCodeOlderThanFiveMinutesIsRefusedOnTheSandboxClock() async throws {
        try await withGoogle { sandbox, _, app in
            let young = try await sandbox.google.mintCode(.init(clientID: app.clientID, subject: "u1"))
            let old = try await sandbox.google.mintCode(.init(clientID: app.clientID, subject: "u1"))
            await #expect {
                try await sandbox.google.advanceClock(by: -1)
            } throws: { ($0 as? SandboxAdminFailure)?.status == 400 }
            try await sandbox.google.advanceClock(by: 200)
            #expect(try await app.exchange(code: young.value, redirectURI: nil).identity == .verified(subject: "u1"))
            try await sandbox.google.advanceClock(by: 101)
            await #expect {
                try await app.exchange(code: old.value, redirectURI: nil)
            } throws: { isFailure($0, .credentialRejected, status: 400, code: "invalid_grant") }
            #expect(try await sandbox.google.grant(young.grantID).codeExchanges == 1)
            #expect(try await sandbox.google.grant(old.grantID).rejectedCodeExchanges == 1)
        }
    }

    @Test func aRefreshProvesTheGrantAndNamesItsUser() async throws {
        try await withGoogle { sandbox, _, app in
            let minted = try await sandbox.google.mintRefreshToken(clientID: app.clientID, subject: "u-live")
            #expect(try await app.prove(refreshToken: minted.value).identity == .verified(subject: "u-live"))
            #expect(try await sandbox.google.grant(minted.grantID).validations == 1)

            let noOpenID = try await sandbox.google.mintRefreshToken(clientID: app.clientID, subject: "u-plain", openID: false)
            #expect(try await app.prove(refreshToken: noOpenID.value).identity == .absent)

            try await app.revoke(token: minted.value, kind: .refreshToken)
            await #expect {
                try await app.prove(refreshToken: minted.value)
            } throws: { isFailure($0, .credentialRejected, status: 400, code: "invalid_grant") }
            await #expect {
                try await app.prove(refreshToken: "1//0-never-issued")
            } throws: { isFailure($0, .credentialRejected, status: 400, code: "invalid_grant") }
        }
    }

    @Test func anotherClientsTokenIsRefusedForThatRequestOnly() async throws {
        try await withGoogle { sandbox, client, app in
            let other = try await sandbox.registerGoogleApp(clientID: "2000-other.apps.googleusercontent.com")
            let foreign = try await sandbox.google.mintRefreshToken(clientID: other.clientID, subject: "u2")
            await #expect {
                try await app.prove(refreshToken: foreign.value)
            } throws: { isFailure($0, .requestRejected, status: 401, code: "unauthorized_client") }
            #expect(try await sandbox.google.grant(foreign.grantID).revoked == false)
            _ = client
        }
    }

    @Test func theClientSecretIsCheckedAndAProbeSaysSo() async throws {
        try await withGoogle { sandbox, client, app in
            try await app.probe()
            let wrong = try GoogleApp(clientID: app.clientID, clientSecret: GoogleClientSecret("GOCSPX-wrong"))
            let wrongApp = try #require(GoogleProvider(apps: [wrong], client: client).apps[wrong.clientID])
            let minted = try await sandbox.google.mintRefreshToken(clientID: app.clientID, subject: "u3")
            await #expect {
                try await wrongApp.prove(refreshToken: minted.value)
            } throws: { isFailure($0, .configurationFault, status: 401, code: "invalid_client") }
            await #expect {
                try await wrongApp.probe()
            } throws: { isFailure($0, .configurationFault, status: 401, code: "invalid_client") }
            let unknown = try GoogleApp(clientID: "3000-unknown.apps.googleusercontent.com", clientSecret: GoogleClientSecret("GOCSPX-x"))
            let unknownApp = try #require(GoogleProvider(apps: [unknown], client: client).apps[unknown.clientID])
            await #expect {
                try await unknownApp.probe()
            } throws: { isFailure($0, .configurationFault, status: 401, code: "invalid_client") }
            #expect(try await sandbox.google.grant(minted.grantID).validations == 0)
        }
    }

    @Test func whatIsTransientIsRetryableAndNothingSecretIsRepeated() async throws {
        try await withGoogle { sandbox, _, app in
            let minted = try await sandbox.google.mintRefreshToken(clientID: app.clientID, subject: "u4")
            try await sandbox.google.setFaults(SandboxFaults(unavailableRate: 1))
            await #expect {
                try await app.revoke(token: minted.value, kind: .refreshToken)
            } throws: { isFailure($0, .transient, status: 503) }
            try await sandbox.google.setFaults(SandboxFaults(throttleRate: 1, retryAfterSeconds: 7))
            await #expect {
                try await app.prove(refreshToken: minted.value)
            } throws: { error in
                isFailure(error, .transient, status: 429) && (error as? ProviderFailure)?.retryAfter == .seconds(7)
            }
            try await sandbox.google.setFaults(SandboxFaults(dropRate: 1))
            await #expect {
                try await app.revoke(token: minted.value, kind: .refreshToken)
            } throws: { isFailure($0, .transient, status: nil) }
            try await sandbox.google.setFaults(.none)
            #expect(try await sandbox.google.grant(minted.grantID).revoked == false)

            // Refusals never carry the token or the secret, whatever Google's description says.
            do {
                try await app.revoke(token: "ya29.unknown-token-value", kind: .accessToken)
                Issue.record("an unknown token was revoked")
            } catch let failure as ProviderFailure {
                let text = "\(failure) \(failure.detail) \(failure.errorDescription ?? "")"
                #expect(!text.contains("ya29.unknown-token-value"))
                #expect(!text.contains(app.app.clientSecret.value))
                #expect(failure.classification == .credentialRejected)
            }
        }
    }

    @Test func secretsAreSentInTheBodyOnly() async throws {
        try await withGoogle { sandbox, _, app in
            let minted = try await sandbox.google.mintRefreshToken(clientID: app.clientID, subject: "u5")
            var request = HTTPClientRequest(url: sandbox.googleBaseURL + "/revoke?token=\(minted.value)")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: "token=\(minted.value)"))
            let response = try await sandbox.httpClient.execute(request, timeout: .seconds(10))
            #expect(response.status == .badRequest)
            #expect(try await sandbox.google.grant(minted.grantID).revoked == false)
        }
    }
}

@Suite("Google client secrets and client IDs")
struct GoogleAppTests {
    @Test func aSecretFileIsTheSecretOrGooglesDownload() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("google-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let clientID = "1000-web.apps.googleusercontent.com"
        func write(_ text: String) throws -> String {
            let path = directory.appendingPathComponent(UUID().uuidString).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        #expect(try GoogleClientSecret.load(contentsOfFile: write("GOCSPX-abc123\n"), clientID: clientID).value == "GOCSPX-abc123")
        let download = #"{"web":{"client_id":"1000-web.apps.googleusercontent.com","client_secret":"GOCSPX-fromjson","redirect_uris":[]}}"#
        let secret = try GoogleClientSecret.load(contentsOfFile: write(download), clientID: clientID)
        #expect(secret.value == "GOCSPX-fromjson")
        #expect("\(secret)" == "GoogleClientSecret(redacted)")
        #expect(!String(reflecting: secret).contains("fromjson"))

        let otherClient = try write(#"{"installed":{"client_id":"9-x.apps.googleusercontent.com","client_secret":"GOCSPX-s"}}"#)
        #expect(throws: GoogleSignInError.self) { try GoogleClientSecret.load(contentsOfFile: otherClient, clientID: clientID) }
        for bad in ["", "two words", #"{"other":{}}"#] {
            #expect {
                try GoogleClientSecret.load(contentsOfFile: write(bad), clientID: clientID)
            } throws: { ($0 as? GoogleSignInError)?.code == .invalidClientSecret }
        }
        #expect {
            try GoogleClientSecret.load(contentsOfFile: directory.appendingPathComponent("absent").path, clientID: clientID)
        } throws: { ($0 as? GoogleSignInError)?.code == .clientSecretFileNotFound }
    }

    @Test func clientIDsHaveGooglesShape() throws {
        let secret = try GoogleClientSecret("GOCSPX-a")
        let app = try GoogleApp(clientID: "1-web.apps.googleusercontent.com", clientSecret: secret, audiences: ["2-ios.apps.googleusercontent.com"])
        #expect(app.audiences == ["1-web.apps.googleusercontent.com", "2-ios.apps.googleusercontent.com"])
        #expect(!"\(app)".contains("GOCSPX"))
        for bad in ["com.example.app", ".apps.googleusercontent.com", "1 2.apps.googleusercontent.com"] {
            #expect { try GoogleApp(clientID: bad, clientSecret: secret) } throws: { ($0 as? GoogleSignInError)?.code == .invalidClientID }
        }
    }
}
