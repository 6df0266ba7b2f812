import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

/// Every provider's messages in one table (migration 0026): the rows a database already held
/// read the same through the names they had, and a provider the store has never heard of is
/// kept, audited and told to the app backend without a migration.
@Suite("Providers' messages in one table")
struct ProviderMessagesTests {
    static let logger = Logger(label: "test")

    @Test func aProviderTheStoreHasNeverHeardOfNeedsNoMigration() async throws {
        try await ScratchDatabase.withScratchDatabase(.migrated) { db in
            let messages = ProviderMessages(client: db.client, logger: Self.logger)
            let provider = try #require(ProviderName(rawValue: "example"))
            let source = ProviderMessageSource(provider: provider, actor: "example:push", sender: "Example")
            var message = ProviderMessage(
                id: "m-1",
                clientID: "example-app",
                type: "user-gone",
                userID: "u-1",
                endsGrants: true,
                eventType: "example.user_gone",
                issuedAt: Date(),
                issuer: "https://example.com",
                keyID: "k1",
                details: [.init("reason", .text("removed")), .init("seen", .flag(true))]
            )
            #expect(try await messages.receive(message, from: source) == .accepted(endedRequests: 0))
            #expect(try await messages.receive(message, from: source) == .duplicate, "a replay changes nothing")
            #expect(try await messages.count(from: provider) == 1)
            let details = try await Self.texts(db, "SELECT details::text FROM revoker.provider_messages WHERE provider = 'example'")
            #expect(details == [#"{"seen": true, "reason": "removed"}"#])

            let feed = EventFeed(client: db.client, logger: Self.logger)
            let events = try await eventuallyValue("the message's event in the feed") {
                let events = try await feed.events(after: nil)
                return events.isEmpty ? nil : events
            }
            #expect(events.map(\.type) == ["example.user_gone"])
            #expect(events.first?.provider == "example" && events.first?.userID == "u-1" && events.first?.notificationID == "m-1")
            let audit = try await AuditLog(client: db.client, logger: Self.logger).query(AuditQuery(clientID: "example-app"))
            #expect(audit.records.map(\.event) == ["provider_message"])
            #expect(audit.records.first?.actor == "example:push")

            // An event named under another provider is not this provider's to publish.
            message.id = "m-2"
            message.eventType = "apple.consent_revoked"
            await #expect(throws: (any Error).self) { try await messages.receive(message, from: source) }
            #expect(try await messages.count(from: provider) == 1, "nothing of the refused message is kept")
        }
    }

    @Test func theRowsOfBothProvidersTablesReadTheSameAfterTheMove() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { (db: ScratchDatabase) async throws in
            let before = Array(Migration.all.prefix { $0.version < 26 })
            try await Migrator(client: db.client, logger: Self.logger, migrations: before).migrate()
            try await db.client.query(
                """
                INSERT INTO revoker.apple_notifications
                    (jti, client_id, type, type_as_sent, apple_user_id, event_time, issued_at, expires_at, issuer, key_id,
                     had_email, is_private_email, received_at)
                VALUES ('a-1', 'com.example.app', 'account-delete', 'account-deleted', '000.a', '2026-03-01T10:00:00.123456Z',
                        '2026-03-01T10:00:01Z', '2026-03-02T10:00:00Z', 'https://appleid.apple.com', 'ka', true, true,
                        '2026-03-01T10:00:02Z'),
                       ('a-2', 'com.example.app', 'email-enabled', 'email-enabled', '000.b', '2026-03-01T11:00:00Z',
                        '2026-03-01T11:00:01Z', NULL, 'https://appleid.apple.com', 'ka', false, NULL, '2026-03-01T11:00:02Z'),
                       ('a-3', 'com.example.app', 'some-new-type', 'some-new-type', '000.c', '2026-03-01T12:00:00Z',
                        '2026-03-01T12:00:01Z', NULL, 'https://appleid.apple.com', 'ka', false, NULL, '2026-03-01T12:00:02Z')
                """
            )
            try await db.client.query(
                """
                INSERT INTO revoker.google_security_events
                    (jti, client_id, audience, type, type_uri, google_user_id, reason, issued_at, issuer, key_id, received_at)
                VALUES ('a-1', '1-x.apps.googleusercontent.com', '1-x.apps.googleusercontent.com', 'tokens-revoked',
                        'https://schemas.openid.net/secevent/risc/event-type/tokens-revoked', '1001', 'hijacking',
                        '2026-03-01T10:30:00Z', 'https://accounts.google.com/', 'kg', '2026-03-01T10:30:01Z'),
                       ('g-2', '1-x.apps.googleusercontent.com', '1-x.apps.googleusercontent.com', 'token-revoked',
                        'https://schemas.openid.net/secevent/risc/event-type/token-revoked', NULL, NULL,
                        '2026-03-01T10:40:00Z', 'https://accounts.google.com/', 'kg', '2026-03-01T10:40:01Z')
                """
            )
            let apple = "SELECT row_to_json(n)::jsonb - 'id' FROM revoker.apple_notifications n ORDER BY jti"
            let google = "SELECT row_to_json(g)::jsonb - 'id' FROM revoker.google_security_events g ORDER BY jti"
            let appleBefore = try await Self.texts(db, apple)
            let googleBefore = try await Self.texts(db, google)
            #expect(appleBefore.count == 3 && googleBefore.count == 2)

            #expect(try await Migrator(client: db.client, logger: Self.logger).migrate().first == 26, "0026 moves the rows")
            #expect(try await Self.texts(db, apple) == appleBefore, "Apple's rows read the same through the view")
            #expect(try await Self.texts(db, google) == googleBefore, "Google's rows read the same through the view")

            let moved = try await Self.texts(
                db,
                """
                SELECT provider || ' ' || message_id || ' ' || ends_grants || ' ' || ends_account || ' ' || coalesce(event_type, '-')
                FROM revoker.provider_messages ORDER BY received_at
                """
            )
            #expect(
                moved == [
                    "apple a-1 true true apple.account_deleted", "google a-1 true false google.tokens_revoked",
                    "google g-2 false false google.token_revoked", "apple a-2 false false apple.email_enabled",
                    "apple a-3 false false -",
                ]
            )

            // A replay of a moved message is a replay; the same id from the other provider is not.
            let replay = """
                INSERT INTO revoker.provider_messages (provider, message_id, client_id, type, user_id, ends_grants, issued_at, issuer, key_id)
                VALUES ($1, 'a-1', 'com.example.app', 'consent-revoked', '000.a', true, now(), 'https://appleid.apple.com', 'ka')
                ON CONFLICT (provider, message_id) DO NOTHING RETURNING id
                """
            for (provider, stored) in [("apple", 0), ("other", 1)] {
                var binds = PostgresBindings()
                binds.append(provider)
                let rows = try await db.client.query(PostgresQuery(unsafeSQL: replay, binds: binds)).collect()
                #expect(rows.count == stored, "\(provider)")
            }
            // Append-only, as the two tables were.
            await #expect(throws: (any Error).self) {
                try await db.client.query("DELETE FROM revoker.provider_messages WHERE provider = 'apple'")
            }
        }
    }

    static func texts(_ db: ScratchDatabase, _ sql: String) async throws -> [String] {
        try await db.client.query(PostgresQuery(unsafeSQL: sql)).collect().map { try $0.decode(String.self) }
    }
}
