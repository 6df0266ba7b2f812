import Foundation
import Logging
import PostgresNIO
import RevokerLocalStack
import RevokerStore
import Testing

/// One validation of a new revocation: the Swift value refuses what breaks a rule, naming the
/// field, and the SQL function refuses the same inputs.
@Suite("New revocation limits")
struct NewRevocationTests {
    /// One input that breaks one rule, as the Swift API and the SQL function receive it.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var field: NewRevocation.Field
        var clientID = "com.example.app"
        var reference = "user-1"
        var userID: String?
        var secret = "r.valid-token"
        var redirectURI: String?
        var maxAttempts = 8
        var testDescription: String { name }

        func make() throws(NewRevocation.Invalid) -> NewRevocation {
            try NewRevocation(
                clientID: clientID,
                externalReference: reference,
                userID: userID,
                credential: Credential(kind: .refreshToken, secret: secret),
                redirectURI: redirectURI,
                maxAttempts: maxAttempts
            )
        }
    }

    static let cases: [Case] = [
        Case(name: "empty client_id", field: .clientID, clientID: ""),
        Case(name: "client_id of 256 characters", field: .clientID, clientID: String(repeating: "c", count: 256)),
        Case(
            name: "reference of 256 code points in one character",
            field: .externalReference,
            reference: "e" + String(repeating: "\u{301}", count: 255)
        ),
        Case(name: "reference with ESC", field: .externalReference, reference: "user\u{1B}[31m"),
        Case(name: "reference with CR LF", field: .externalReference, reference: "user\r\n2"),
        Case(name: "reference with a C1 control", field: .externalReference, reference: "user\u{85}"),
        Case(name: "empty reference", field: .externalReference, reference: ""),
        Case(name: "apple_user_id with a tab", field: .userID, userID: "000123\t.abc"),
        Case(name: "reference of white space only", field: .externalReference, reference: "   "),
        Case(name: "reference of a lone zero-width space", field: .externalReference, reference: "\u{200B}"),
        Case(name: "reference with a right-to-left override", field: .externalReference, reference: "user\u{202E}kcatta"),
        Case(name: "reference with a line separator", field: .externalReference, reference: "user\u{2028}2"),
        Case(name: "reference with a trailing no-break space", field: .externalReference, reference: "user\u{A0}"),
        Case(name: "reference with a byte order mark", field: .externalReference, reference: "\u{FEFF}user"),
        Case(name: "reference with a private-use character", field: .externalReference, reference: "user\u{F8FF}"),
        Case(name: "client_id with a leading space", field: .clientID, clientID: " com.example.app"),
        Case(name: "credential with a space", field: .credential, secret: "two words"),
        Case(name: "credential beyond ASCII", field: .credential, secret: "tok-\u{E4}-1"),
        Case(name: "credential of 8193 bytes", field: .credential, secret: String(repeating: "t", count: 8193)),
        Case(name: "redirect_uri not a URL", field: .redirectURI, redirectURI: "not a url"),
        Case(name: "redirect_uri with another scheme", field: .redirectURI, redirectURI: "ftp://example.com/callback"),
        Case(name: "max_attempts 0", field: .maxAttempts, maxAttempts: 0),
        Case(name: "max_attempts 101", field: .maxAttempts, maxAttempts: 101),
        Case(name: "max_attempts 1000", field: .maxAttempts, maxAttempts: 1000),
    ]

    @Test(arguments: cases)
    func theSwiftValueRefusesItNamingTheField(_ input: Case) {
        let error = #expect(throws: NewRevocation.Invalid.self) { try input.make() }
        #expect(error?.field == input.field)
        #expect(error.map { !$0.description.contains(input.secret) } == true, "the rule never repeats the value")
    }

    // Every case in one database: a scratch database per case, created and migrated at once,
    // was the burst that the full suite was seen to hang in.
    @Test func theSQLFunctionRefusesTheSameAndStoresNothing() async throws {
        try await ScratchDatabase.withScratchDatabase(.migrated) { db in
            let logger = Logger(label: "test")
            for input in Self.cases {
                let query: PostgresQuery = """
                    SELECT revoker.enqueue_revocation(\(input.clientID), \(input.reference), 'refresh_token', \(input.secret),
                        apple_user_id => \(input.userID), redirect_uri => \(input.redirectURI), max_attempts => \(input.maxAttempts)::int)
                    """
                let error = await #expect(throws: PSQLError.self, "\(input.name)") { _ = try await db.client.query(query, logger: logger).collect() }
                #expect(error?.serverInfo?[.sqlState] == "22023", "\(input.name)")
                let message = error?.serverInfo?[.message] ?? "-"
                #expect(message.hasPrefix(input.field.rawValue), "\(input.name): \(message)")
            }
            let rows = try await db.client.query("SELECT count(*)::int FROM revoker.revocation_requests", logger: logger).collect()
            #expect(try rows.first?.decode(Int.self) == 0)
        }
    }

    @Test func theLimitsAcceptTheirBounds() throws {
        let longest = try NewRevocation(
            clientID: String(repeating: "c", count: 255),
            externalReference: String(repeating: "r", count: 255),
            userID: String(repeating: "a", count: 255),
            credential: Credential(kind: .authorizationCode, secret: String(repeating: "t", count: 8192)),
            redirectURI: "https://example.com/" + String(repeating: "p", count: 2028),
            maxAttempts: 100
        )
        #expect(longest.maxAttempts == NewRevocation.maxAttemptsRange.upperBound)
        #expect(
            try NewRevocation(clientID: "c", externalReference: "r", credential: Credential(kind: .refreshToken, secret: "t"), maxAttempts: 1)
                .maxAttempts == 1
        )
    }

    @Test func migrationTwoCapsExistingRequestsAtTheNewLimit() async throws {
        try await ScratchDatabase.withScratchDatabase(.empty) { db in
            let logger = Logger(label: "test")
            let first = try #require(Migration.all.first)
            #expect(try await Migrator(client: db.client, logger: logger, migrations: [first]).migrate() == [1])
            let id = try #require(
                try await db.client.query(
                    "SELECT revoker.enqueue_revocation('com.example.app', 'old-1', 'refresh_token', 'tok-old', max_attempts => 1000)",
                    logger: logger
                ).collect().first?.decode(UUID.self)
            )
            let second = Array(Migration.all.prefix(2))
            #expect(try await Migrator(client: db.client, logger: logger, migrations: second).migrate() == [2])
            let rows = try await db.client.query("SELECT max_attempts FROM revoker.revocation_requests WHERE id = \(id)", logger: logger).collect()
            #expect(try rows.first?.decode(Int.self) == 100)
            await #expect(throws: PSQLError.self) {
                _ = try await db.client.query("UPDATE revoker.revocation_requests SET max_attempts = 101", logger: logger).collect()
            }
        }
    }
}
