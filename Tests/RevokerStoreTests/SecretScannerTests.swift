import RevokerTesting
import Testing

/// The tests' search for leaked secrets finds every secret wherever it stands, and nothing else.
@Suite("The secret scanner")
struct SecretScannerTests {
    @Test func everySecretIsFoundAtTheStartTheMiddleAndTheEndAndNothingElse() {
        let secrets = ["r.0123456789abcdef", "c.short", "a-much-longer-secret-of-its-own-length-éè"]
        let scanner = SecretScanner(secrets)
        for secret in secrets {
            #expect(scanner.foundAny(in: secret))
            #expect(scanner.foundAny(in: secret + " after"))
            #expect(scanner.foundAny(in: "before \"" + secret + "\""))
            #expect(scanner.foundAny(in: String(repeating: "x", count: 10_000) + secret + "\n"))
        }
        #expect(!scanner.foundAny(in: "r.0123456789abcde c.shor a-much-longer-secret-of-its-own-length-é"))
        #expect(!scanner.foundAny(in: ""))
        #expect(!SecretScanner([]).foundAny(in: "anything"))
        let many = SecretScanner((0..<10_000).map { "r.token-\($0)-end" })
        #expect(many.foundAny(in: String(repeating: "log line; ", count: 1000) + "r.token-9999-end"))
        #expect(!many.foundAny(in: String(repeating: "log line; ", count: 1000) + "r.token-10000-end"))
    }
}
