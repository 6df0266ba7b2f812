import Foundation
import NIOHTTP1
import RevokerProvider
import Testing

@testable import AppleSignIn

@Suite("Apple's answers")
struct AppleErrorTests {
    func answer(
        _ status: Int,
        _ body: String,
        headers: [(String, String)] = [("Content-Type", "application/json")],
        secrets: [String] = []
    ) -> AppleAPIError {
        AppleClient.failure(.token, status: status, headers: HTTPHeaders(headers), body: Data(body.utf8), secrets: secrets)
    }

    @Test(arguments: [
        ("invalid_grant", AppleAPIError.Classification.credentialRejected),
        ("invalid_client", .configurationFault),
        ("unauthorized_client", .configurationFault),
        ("unsupported_grant_type", .configurationFault),
        ("invalid_request", .requestRejected),
        ("invalid_scope", .requestRejected),
        ("unsupported_token_type", .requestRejected),
        ("something_new", .requestRejected),
    ])
    func everyAppleErrorCodeIsClassified(code: String, expected: AppleAPIError.Classification) {
        let error = answer(400, #"{"error":"\#(code)","error_description":"said Apple"}"#)
        #expect(error.classification == expected)
        #expect(error.error == code)
        #expect(error.errorDescription == "said Apple")
        #expect(error.httpStatus == 400)
        #expect(error.retryAfter == nil)
    }

    @Test(arguments: [500, 502, 503, 504])
    func serverErrorsAreTransient(status: Int) {
        let error = answer(status, "<html>Bad Gateway</html>", headers: [("Content-Type", "text/html")])
        #expect(error.classification == .transient)
        #expect(error.httpStatus == status)
        #expect(!error.description.contains("Bad Gateway"), "a proxy's page is never echoed")
    }

    @Test func throttlingCarriesRetryAfter() {
        let error = answer(429, "", headers: [("Retry-After", "17")])
        #expect(error.classification == .transient)
        #expect(error.retryAfter == .seconds(17))
    }

    @Test(arguments: ["<html>Forbidden</html>", "{\"message\":\"nope\"}", "{\"error\":42}", "\u{0}\u{1}garbage", ""])
    func clientErrorsWithoutApplesBodyAreTransient(body: String) {
        let error = answer(403, body, headers: [("Content-Type", "text/html")])
        #expect(error.classification == .transient)
        #expect(error.error == nil)
        #expect(!error.description.contains("Forbidden") && !error.description.contains("nope"))
    }

    @Test func anErrorCodeThatIsNotAWordIsNotTrusted() {
        let error = answer(400, #"{"error":"<script>alert(1)</script>"}"#)
        #expect(error.error == nil)
        #expect(error.classification == .transient)
    }

    @Test func descriptionsAreBoundedStrippedAndScrubbed() throws {
        let token = "r0123456789abcdef.0.secret"
        let long = String(repeating: "x", count: 5000)
        let error = answer(400, #"{"error":"invalid_grant","error_description":"token \#(token) bad\n\#(long)"}"#, secrets: [token])
        let description = try #require(error.errorDescription)
        #expect(!description.contains(token))
        #expect(description.contains("[redacted]"))
        #expect(!description.contains("\n"))
        #expect(description.count <= SafeText.maximumDescriptionLength + 1)
        #expect(!error.description.contains(token))
    }

    @Test func unexpectedStatusesAreTransient() {
        #expect(answer(302, "").classification == .transient)
        #expect(answer(418, "").classification == .transient)
    }

    @Test func tokenResponsesNeverPrintTheirTokens() throws {
        let json = #"{"access_token":"a.secret","token_type":"Bearer","expires_in":3600,"refresh_token":"r.secret","id_token":"x.y.z"}"#
        let response = try JSONDecoder().decode(AppleTokenResponse.self, from: Data(json.utf8))
        #expect(response.refreshToken == "r.secret")
        for text in [String(describing: response), String(reflecting: response), "\(response)"] {
            #expect(!text.contains("secret") && !text.contains("x.y.z"))
        }
    }
}
