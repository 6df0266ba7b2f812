import Crypto
import FacebookLogin
import FacebookLoginSandbox
import Foundation
import Testing

/// `signed_request`s as Facebook sends them to the Data Deletion Request and Deauthorize
/// callbacks: the sandbox makes genuine ones and forgeries over HTTP; each forgery is refused
/// for its own reason, and the genuine ones, padded or not, are accepted.
@Suite("Facebook signed_request")
struct FacebookSignedRequestTests {
    typealias Harness = FacebookSandboxHarness
    static let user = "10229876543210001"

    @Test func aGenuineSignedRequestVerifiesPaddedOrNotAndNamesThePerson() async throws {
        try await Harness.with { harness in
            let secret = harness.app.secret
            for padded in [false, true] {
                let text = try await harness.admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, padded: padded))
                #expect(text.contains("=") == padded, "the sandbox pads only when asked")
                let verified = try FacebookSignedRequest.verify(text, secret: secret)
                #expect(verified.userID == Self.user)
                #expect(abs(verified.issuedAt.timeIntervalSinceNow) < 5)
                #expect(verified.digest.count == 64)
                // The same request sent again is recognised by its digest; another one is not.
                #expect(try FacebookSignedRequest.verify(text, secret: secret).digest == verified.digest)
            }
            let one = try await harness.admin.signedRequest(.init(appID: Harness.appID, userID: Self.user))
            let other = try await harness.admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, issuedIn: -60))
            #expect(try FacebookSignedRequest.verify(one, secret: secret).digest != FacebookSignedRequest.verify(other, secret: secret).digest)
        }
    }

    /// An hour-old request still verifies (Facebook may retry a callback), a day-old one does not.
    @Test func theAgeGuardLetsAnHourOldRequestThroughAndStopsAStaleOne() async throws {
        try await Harness.with { harness in
            let hourOld = try await harness.admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, issuedIn: -3600))
            #expect(try FacebookSignedRequest.verify(hourOld, secret: harness.app.secret).userID == Self.user)
            let stale = try await harness.admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, issuedIn: -86_400 - 60))
            #expect(throws: FacebookLoginError.self) { try FacebookSignedRequest.verify(stale, secret: harness.app.secret) }
        }
    }

    /// Ten forgeries and malformations, each refused with the code that names it.
    @Test func forgedAndMalformedSignedRequestsAreRefusedEachForItsReason() async throws {
        try await Harness.with { harness in
            let admin = harness.admin
            let genuine = try await admin.signedRequest(.init(appID: Harness.appID, userID: Self.user))
            let parts = genuine.split(separator: ".").map(String.init)
            // A payload of our own, signed with the app's secret: to test what the payload may hold.
            func signed(_ payload: String) -> String {
                let encoded = Data(payload.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
                let mac = HMAC<SHA256>.authenticationCode(for: Array(encoded.utf8), using: SymmetricKey(data: Array(Harness.secret.utf8)))
                let signature = Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
                return signature + "." + encoded
            }
            let now = Int(Date().timeIntervalSince1970)
            var flipped = Array(parts[0].utf8)
            flipped[3] = flipped[3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let cases: [(String, String, FacebookLoginError.Code)] = [
                ("a flipped signature byte", String(decoding: flipped, as: UTF8.self) + "." + parts[1], .invalidSignature),
                (
                    "the other app's secret",
                    try await admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, secret: Harness.otherSecret)),
                    .invalidSignature
                ),
                (
                    "HMAC-SHA1 named",
                    try await admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, algorithm: "HMAC-SHA1")),
                    .unsupportedAlgorithm
                ),
                ("none named", signed("{\"algorithm\":\"none\",\"issued_at\":\(now),\"user_id\":\"\(Self.user)\"}"), .unsupportedAlgorithm),
                (
                    "issued two days ago", try await admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, issuedIn: -172_800)),
                    .staleSignedRequest
                ),
                (
                    "issued an hour ahead", try await admin.signedRequest(.init(appID: Harness.appID, userID: Self.user, issuedIn: 3600)),
                    .staleSignedRequest
                ),
                ("no period", parts[0] + parts[1], .malformedSignedRequest),
                ("three parts", genuine + ".e30", .malformedSignedRequest),
                ("wrong padding", parts[0] + "===." + parts[1], .malformedSignedRequest),
                ("a standard-alphabet character", parts[0].replacingOccurrences(of: "-", with: "+") + "+." + parts[1], .malformedSignedRequest),
                (
                    "bytes after the JSON", signed("{\"algorithm\":\"HMAC-SHA256\",\"issued_at\":\(now),\"user_id\":\"\(Self.user)\"}x"),
                    .malformedSignedRequest
                ),
                (
                    "a user id that is not digits", signed("{\"algorithm\":\"HMAC-SHA256\",\"issued_at\":\(now),\"user_id\":\"1 OR 1\"}"),
                    .malformedSignedRequest
                ),
                ("no user id", signed("{\"algorithm\":\"HMAC-SHA256\",\"issued_at\":\(now)}"), .malformedSignedRequest),
                (
                    "a duplicate algorithm", signed("{\"algorithm\":\"none\",\"algorithm\":\"HMAC-SHA256\",\"issued_at\":\(now),\"user_id\":\"1\"}"),
                    .malformedSignedRequest
                ),
                ("longer than 8 KiB", String(repeating: "A", count: 8193) + "." + parts[1], .malformedSignedRequest),
            ]
            for (name, text, code) in cases {
                do throws(FacebookLoginError) {
                    _ = try FacebookSignedRequest.verify(text, secret: harness.app.secret)
                    Issue.record("\(name) was accepted")
                } catch {
                    #expect(error.code == code, "\(name): \(error.message)")
                    #expect(
                        !error.message.contains(Harness.secret) && !error.message.contains(parts[0]),
                        "\(name): the message repeats nothing secret"
                    )
                }
            }
            // The same request verifies with its own app's secret, never with another's.
            #expect(throws: FacebookLoginError.self) { try FacebookSignedRequest.verify(genuine, secret: harness.otherApp.secret) }
        }
    }
}
