import Foundation
import Testing

@testable import AppleSignIn

@Suite("Reading the events claim of Apple's notifications")
struct NotificationEventTests {
    @Test func bothSpellingsOfAccountDeletionAreOneType() throws {
        for spelling in ["account-delete", "account-deleted"] {
            let event = try AppleNotificationVerifier.event("{\"type\":\"\(spelling)\",\"sub\":\"u\",\"event_time\":1700000000000}")
            #expect(event.type == .accountDeleted)
            #expect(event.typeAsSent == spelling)
        }
    }

    @Test func isPrivateEmailIsABooleanOrAString() throws {
        let base = "\"type\":\"email-disabled\",\"sub\":\"u\",\"event_time\":1700000000000"
        #expect(try AppleNotificationVerifier.event("{\(base),\"is_private_email\":true}").isPrivateEmail == true)
        #expect(try AppleNotificationVerifier.event("{\(base),\"is_private_email\":\"false\"}").isPrivateEmail == false)
        #expect(try AppleNotificationVerifier.event("{\(base)}").isPrivateEmail == nil)
        #expect(throws: AppleSignInError.self) { try AppleNotificationVerifier.event("{\(base),\"is_private_email\":1}") }
        #expect(throws: AppleSignInError.self) { try AppleNotificationVerifier.event("{\(base),\"is_private_email\":\"yes\"}") }
    }

    @Test func eventTimeIsReadAsMillisecondsOrSeconds() throws {
        let millis = try AppleNotificationVerifier.event("{\"type\":\"email-enabled\",\"sub\":\"u\",\"event_time\":1700000000123}")
        #expect(abs(millis.time.timeIntervalSince1970 - 1_700_000_000.123) < 0.001)
        let seconds = try AppleNotificationVerifier.event("{\"type\":\"email-enabled\",\"sub\":\"u\",\"event_time\":1508184845}")
        #expect(seconds.time.timeIntervalSince1970 == 1_508_184_845)
    }

    @Test func eventsMissingWhatTheyNeedAreRefusedNamingIt() {
        let cases: [(String, String)] = [
            ("[]", "not a JSON object"), ("{\"sub\":\"u\",\"event_time\":1}", "type"),
            ("{\"type\":\"Consent Revoked\",\"sub\":\"u\",\"event_time\":1}", "type"),
            ("{\"type\":\"consent-revoked\",\"event_time\":1}", "sub"), ("{\"type\":\"consent-revoked\",\"sub\":\"\",\"event_time\":1}", "sub"),
            ("{\"type\":\"consent-revoked\",\"sub\":\"u\"}", "event_time"),
            ("{\"type\":\"consent-revoked\",\"sub\":\"u\",\"event_time\":\"1\"}", "event_time"),
        ]
        for (text, word) in cases {
            #expect {
                try AppleNotificationVerifier.event(text)
            } throws: { error in
                (error as? AppleSignInError)?.code == .malformedNotification && "\(error)".contains(word)
            }
        }
    }

    @Test func aTypeAppleMayAddLaterIsKeptAsSent() throws {
        let event = try AppleNotificationVerifier.event("{\"type\":\"account-transferred\",\"sub\":\"u\",\"event_time\":1700000000000}")
        #expect(event.type.rawValue == "account-transferred")
        #expect(!event.type.endsGrants)
    }
}
