import FacebookLogin
import FacebookLoginSandbox
import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `revoker serve` SIGKILLed while Facebook calls the Deauthorize and Data Deletion Request
/// callbacks: every callback it answered 200 is stored (a data deletion with the code it
/// answered), and its event reaches the backend once a process runs again.
@Suite("Facebook's callbacks across a killed serve")
struct FacebookCallbackKillTests {
    static let app = "1234567890123456"

    @Test func everyCallbackAnsweredBeforeAKillIsStoredAndItsEventDelivered() async throws {
        try await WebhookReceiver.with { receiver in
            var settings = receiver.settings(name: "backend", clientIDs: [Self.app])
            // The killed process held the endpoint's delivery lease: the next takes it after 5 s.
            settings["webhook_delivery"] =
                [
                    "retry_base_seconds": 0.05, "retry_cap_seconds": 0.2, "poll_interval_seconds": 0.2, "from_start": true, "lease_seconds": 5,
                    "timeout_seconds": 2,
                ]
                as [String: any Sendable]
            try await RevokerTestStack.with(apps: [.facebook: [Self.app]], settings: settings) { stack in
                let facebook = FacebookSandboxAdmin(baseURL: stack.sandbox.baseURL + FacebookSandbox.prefix, httpClient: stack.sandbox.httpClient)
                // The backend is down while the first process runs: every event is delivered by the next.
                receiver.plan { _ in .status(503) }
                var environment = stack.environment
                environment["REVOKER_HTTP_PORT"] = "0"
                let first = try RevokerProcess(["serve", "--log-level", "debug"], environment: environment)
                try await first.waitForOutput("Serving the API")
                let port = try #require(
                    first.stderrSoFar.split(separator: " ").first { $0.hasPrefix("http.port=") }.flatMap {
                        Int($0.dropFirst(10).prefix { $0.isNumber })
                    }
                )
                // Every other person asks for their data to be deleted as well.
                let url: @Sendable (Int) -> String = { index in
                    "http://127.0.0.1:\(port)/v1/facebook/\(index % 2 == 0 ? "deauthorize" : "data-deletion")/\(Self.app)"
                }

                // People remove the app, 8 callbacks at a time; the process dies after the 12th 200.
                let answered = Answered()
                for batch in stride(from: 0, to: 40, by: 8) {
                    try await withThrowingTaskGroup(of: Void.self) { senders in
                        for index in batch..<(batch + 8) {
                            senders.addTask {
                                let user = "\(2000 + index)"
                                // Nothing more is sent once the process is dead (a call to its port would
                                // wait out the client's deadline); what was in flight fails unanswered.
                                guard await !answered.killed else { return }
                                guard
                                    let delivery = try? await facebook.sendCallback(.init(url: url(index), .init(appID: Self.app, userID: user))),
                                    delivery.status == 200
                                else { return }
                                let answer = (try? JSONSerialization.jsonObject(with: Data(delivery.body.utf8))) as? [String: Any]
                                // The 12th answer kills the process, with the rest of its batch in flight.
                                if await answered.add(user, code: answer?["confirmation_code"] as? String) == 12 {
                                    first.signal(SIGKILL)
                                    await answered.kill()
                                }
                            }
                        }
                        try await senders.waitForAll()
                    }
                }
                _ = try? await first.wait(timeout: .seconds(10))
                let users = await answered.users
                #expect(users.count >= 12 && users.count < 40, "the kill came in the middle: \(users.count) answered")

                // Every callback answered 200 is stored.
                let rows = try await stack.database.client.query(
                    "SELECT user_id FROM revoker.provider_messages WHERE provider = 'facebook'"
                ).collect()
                let stored = Set(try rows.map { try $0.decode(String.self) })
                #expect(Set(users).isSubset(of: stored), "answered but not stored: \(Set(users).subtracting(stored).sorted())")
                // And every data deletion answered 200 opened the erasure request its answer named.
                let codes = await answered.codes
                #expect(!codes.isEmpty, "data deletions were answered before the kill")
                let erasures = try await stack.database.client.query("SELECT code, user_id FROM revoker.erasure_requests").collect()
                let opened = Dictionary(uniqueKeysWithValues: try erasures.map { try $0.decode((String, String).self) })
                for (user, code) in codes { #expect(opened[code] == user, "the answered code \(code) of \(user) is stored") }

                // Another process delivers every stored message's event to the backend, now up.
                receiver.plan { _ in .status(200) }
                let second = try RevokerProcess(["work", "--log-level", "info"], environment: stack.environment)
                try await eventually("every stored callback's event delivered", timeout: .seconds(120)) {
                    Self.told(receiver).isSuperset(of: stored)
                }
                let told = Self.erasureCodes(receiver)
                for (user, code) in codes { #expect(told[user] == code, "\(user)'s event carries the code its callback was answered with") }
                print(
                    "facebook callbacks across a SIGKILL: \(users.count) of 40 answered 200 (\(codes.count) data deletions), \(stored.count) stored, every stored one delivered"
                )
                second.signal(SIGTERM)
                let ended = try await second.wait(timeout: .seconds(60))
                #expect(ended.status == 0, "\(ended.stderr.suffix(1000))")
                #expect(receiver.deliveries.allSatisfy { $0.signatureValid })
            }
        }
    }

    /// The people whose callbacks were answered 200.
    actor Answered {
        private(set) var users: [String] = []
        /// The confirmation code each answered data deletion was given, by user.
        private(set) var codes: [String: String] = [:]
        private(set) var killed = false

        func kill() { killed = true }

        /// Adds one; returns how many there are.
        func add(_ user: String, code: String?) -> Int {
            users.append(user)
            if let code { codes[user] = code }
            return users.count
        }
    }

    /// The `data` of the Facebook callbacks' events the backend received.
    static func received(_ receiver: WebhookReceiver) -> [[String: Any]] {
        let types: Set<String> = ["facebook.deauthorized", "facebook.data_deletion_requested"]
        return receiver.deliveries.filter { (200..<300).contains($0.answered) && types.contains($0.type ?? "") }.compactMap { delivery in
            let event = (try? JSONSerialization.jsonObject(with: Data(delivery.body.utf8))) as? [String: Any]
            return event?["data"] as? [String: Any]
        }
    }

    /// The users the backend was told of.
    static func told(_ receiver: WebhookReceiver) -> Set<String> {
        Set(received(receiver).compactMap { $0["user_id"] as? String })
    }

    /// The erasure code of each data deletion the backend was told of, by user.
    static func erasureCodes(_ receiver: WebhookReceiver) -> [String: String] {
        Dictionary(
            received(receiver).compactMap { data in
                (data["user_id"] as? String).flatMap { user in (data["erasure_code"] as? String).map { (user, $0) } }
            },
            uniquingKeysWith: { first, _ in first }
        )
    }
}
