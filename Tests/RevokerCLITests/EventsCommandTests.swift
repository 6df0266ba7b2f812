import AppleSignIn
import Foundation
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

@Suite("revoker events")
struct EventsCommandTests {
    @Test func printsTheFeedAsJSONLinesAndContinuesAfterACursor() async throws {
        try await RevokerTestStack.with { stack in
            let enqueued = try await stack.enqueue(clientID: "com.example.notes", reference: "to-cancel", kind: .refreshToken)
            _ = try await stack.queue.cancel(id: enqueued.request.id, actor: "test")
            let inbox = ProviderMessages(client: stack.database.client, logger: stack.logger)
            let now = Date()
            let receipt = try await inbox.receive(
                ProviderMessage(
                    id: "jti-cli-1",
                    clientID: "com.example.photos",
                    type: "email-disabled",
                    userID: "000123.cli",
                    endsGrants: false,
                    eventType: "apple.email_disabled",
                    eventTime: now,
                    issuedAt: now,
                    issuer: "https://appleid.apple.com",
                    keyID: "test",
                    details: [
                        .init("type_as_sent", .text("email-disabled")), .init("expires_at", .time(nil)),
                        .init("had_email", .flag(false)), .init("is_private_email", .flag(nil)),
                    ]
                ),
                from: AppleNotificationInbox.source
            )
            #expect(receipt == .accepted(endedRequests: 0))

            // Events show once every older writing transaction in the cluster has ended, and the
            // whole suite shares this cluster: wait for both to show before asking the command.
            let feed = EventFeed(client: stack.database.client, logger: stack.logger)
            try await eventually("both events in the feed") { try await feed.events(after: nil).count >= 2 }
            let all = try await RevokerProcess.run(["events"], environment: stack.environment)
            #expect(all.status == 0, "\(all.stderr)")
            let lines = all.stdout.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            #expect(lines.map { $0["type"] as? String } == ["revocation.cancelled", "apple.email_disabled"])
            #expect((lines.first?["data"] as? [String: Any])?["external_reference"] as? String == "to-cancel")

            let cursor = try #require(lines.first?["cursor"] as? String)
            let rest = try await RevokerProcess.run(["events", "--after", cursor], environment: stack.environment)
            #expect(rest.stdout.split(separator: "\n").count == 1 && rest.stdout.contains("apple.email_disabled"), "\(rest.stdout)")
            let photos = try await RevokerProcess.run(["events", "--client-id", "com.example.notes"], environment: stack.environment)
            #expect(photos.stdout.split(separator: "\n").count == 1 && photos.stdout.contains("to-cancel"), "\(photos.stdout)")

            let bad = try await RevokerProcess.run(["events", "--after", "yesterday"], environment: stack.environment)
            #expect(bad.status != 0 && bad.stderr.contains("--after"), "\(bad.stderr)")
        }
    }
}
