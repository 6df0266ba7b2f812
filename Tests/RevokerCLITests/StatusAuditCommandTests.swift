import Foundation
import PostgresNIO
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

@Suite("revoker status and audit")
struct StatusAuditCommandTests {
    /// Enqueues through the binary and returns the request id.
    static func enqueue(_ fixture: CLIFixture, reference: String, token: String, clientID: String = "com.example.app") async throws -> UUID {
        let result = try await fixture.run(
            ["enqueue", "--client-id", clientID, "--reference", reference, "--kind", "refresh-token", "--credential-stdin", "--json"],
            stdin: Data(token.utf8)
        )
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        return try #require((object["id"] as? String).flatMap(UUID.init(uuidString:)))
    }

    /// An idle transaction no longer stalls checkpoints, but the operator is told who holds it.
    @Test func statusNamesTheTransactionsHeldOpen() async throws {
        try await CLIFixture.with { fixture in
            try await fixture.database.client.withConnection { connection in
                _ = try await connection.query("BEGIN", logger: CLIFixture.logger).collect()
                defer { _ = connection.query("ROLLBACK", logger: CLIFixture.logger) }
                let xid = try #require(
                    try await connection.query("SELECT pg_current_xact_id()::text", logger: CLIFixture.logger).collect().first?.decode(String.self)
                )
                // A snapshot lists only ids below the newest finished one, so let a later one finish.
                _ = try await fixture.database.client.query("SELECT pg_current_xact_id()", logger: CLIFixture.logger).collect()
                let result = try await fixture.run(["status", "--json"])
                #expect(result.status == 0, "\(result.stderr)")
                let object = try #require(try parseJSON(result.stdout) as? [String: Any])
                let audit = try #require(object["audit"] as? [String: Any])
                let open = try #require(audit["open_transactions"] as? [[String: Any]])
                let held = try #require(open.first { ($0["txid"] as? Int).map(String.init) == xid }, "\(result.stdout)")
                #expect(held["state"] as? String == "idle in transaction")
                #expect(held["pid"] is Int && held["age_seconds"] is Double)
                let table = try await fixture.run(["status"])
                #expect(table.stdout.contains("Transactions held open"))
                #expect(table.stdout.contains("transaction \(xid):"), "\(table.stdout)")
            }
        }
    }

    @Test("status counts match the database")
    func statusCounts() async throws {
        try await CLIFixture.with(apps: [.apple: ["com.example.app", "com.example.other"]]) { fixture in
            let tokens = (0..<4).map { _ in randomToken() }
            var ids: [UUID] = []
            for (index, token) in tokens.prefix(3).enumerated() {
                ids.append(try await Self.enqueue(fixture, reference: "user-\(index)", token: token))
            }
            _ = try await fixture.queue().cancel(id: ids[0], actor: "test")
            _ = try await fixture.database.client.query(
                "SELECT revoker.enqueue_revocation('com.example.other', 'sql-user', 'refresh_token', \(tokens[3]))",
                logger: CLIFixture.logger
            ).collect()
            try await fixture.queue().pauseApp(
                clientID: "com.example.other",
                reason: ErrorDetail(code: "invalid_client"),
                probeAfter: .seconds(300)
            )

            let result = try await fixture.run(["status", "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            expectNothingLeaked(result, tokens)
            let object = try #require(try parseJSON(result.stdout) as? [String: Any])
            let byState = try #require(object["by_state"] as? [String: Int])
            let rows = try await fixture.database.client.query(
                "SELECT state, count(*)::int FROM revoker.revocation_requests GROUP BY state",
                logger: CLIFixture.logger
            ).collect()
            var expected = Dictionary(uniqueKeysWithValues: RevocationState.all.map { ($0.rawValue, 0) })
            for row in rows {
                let (state, count) = try row.decode((String, Int).self)
                expected[state] = count
            }
            #expect(byState == expected)
            #expect(byState["pending"] == 3)
            #expect(byState["cancelled"] == 1)
            let byOutcome = try #require(object["by_outcome"] as? [String: Int])
            #expect(byOutcome["cancelled"] == 1)
            #expect(byOutcome["revoked"] == 0)
            #expect(object["unsealed_intake"] as? Int == 1)
            #expect((object["oldest_due_age_seconds"] as? Double).map { $0 >= 0 } == true)
            let paused = try #require(object["paused_apps"] as? [[String: Any]])
            #expect(paused.count == 1)
            #expect(paused.first?["client_id"] as? String == "com.example.other")
            #expect(paused.first?["reason_code"] as? String == "invalid_client")
            #expect(paused.first?["next_probe_at"] is String)

            let table = try await fixture.run(["status"])
            #expect(table.status == 0, "\(table.stderr)")
            let lines = table.stdout.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
            #expect(lines.contains("pending 3"), "\(table.stdout)")
            #expect(lines.contains("cancelled 1"), "\(table.stdout)")
            #expect(lines.contains("Unsealed SQL intake: 1"), "\(table.stdout)")
            #expect(table.stdout.contains("com.example.other"))
            #expect(table.stdout.contains("invalid_client"))
        }
    }

    @Test("audit returns the enqueued events in json, csv and table, filtered, and never a token")
    func auditFormatsAndFilters() async throws {
        try await CLIFixture.with { fixture in
            let first = randomToken()
            let second = randomToken()
            let id = try await Self.enqueue(fixture, reference: "user-a", token: first)
            _ = try await Self.enqueue(fixture, reference: "user-b", token: second)

            let json = try await fixture.run(["audit", "--reference", "user-a", "--format", "json"])
            #expect(json.status == 0, "\(json.stderr)")
            expectNothingLeaked(json, [first, second])
            let records = try #require(try parseJSON(json.stdout) as? [[String: Any]])
            #expect(records.count == 1)
            let record = try #require(records.first)
            #expect(Set(record.keys) == Set(AuditRecord.exportColumns))
            #expect(record["event"] as? String == "enqueued")
            #expect(record["request_id"] as? String == id.uuidString.lowercased())
            #expect(record["external_reference"] as? String == "user-a")
            #expect(record["client_id"] as? String == "com.example.app")
            #expect((record["actor"] as? String)?.hasPrefix("cli:") == true)
            #expect(record["http_status"] is NSNull)

            let csv = try await fixture.run(["audit", "--client-id", "com.example.app", "--event", "enqueued", "--format", "csv"])
            #expect(csv.status == 0, "\(csv.stderr)")
            expectNothingLeaked(csv, [first, second])
            let lines = csv.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            #expect(lines.first == AuditRecord.exportColumns.joined(separator: ","))
            #expect(lines.count == 3)
            #expect(lines.dropFirst().allSatisfy { $0.contains(",enqueued,") })

            let table = try await fixture.run(["audit", "--request-id", id.uuidString, "--since", "2000-01-01", "--until", "2999-01-01T00:00:00Z"])
            #expect(table.status == 0, "\(table.stderr)")
            expectNothingLeaked(table, [first, second])
            let tableLines = table.stdout.split(separator: "\n")
            #expect(tableLines.count == 2)
            #expect(tableLines.first?.hasPrefix("OCCURRED AT") == true)
            #expect(tableLines.last?.contains("enqueued") == true)
            #expect(tableLines.last?.contains("user-a") == true)

            for filter in [
                ["--event", "revoked"], ["--since", "2999-01-01"], ["--until", "2000-01-01T00:00:00.000+02:00"], ["--reference", "nobody"],
            ] {
                let empty = try await fixture.run(["audit", "--format", "json"] + filter)
                #expect(empty.status == 0, "\(empty.stderr)")
                #expect((try parseJSON(empty.stdout) as? [Any])?.isEmpty == true, "\(filter): \(empty.stdout)")
            }

            let bad = try await fixture.run(["audit", "--since", "yesterday"])
            #expect(bad.status != 0)
            #expect(bad.stderr.contains("--since"))
        }
    }

    @Test("audit follows cursors past 1000 rows, honours --limit and neutralises formulas in csv")
    func auditPagingAndFormulas() async throws {
        try await CLIFixture.with { fixture in
            _ = try await fixture.database.client.query(
                """
                INSERT INTO revoker.audit_events (client_id, event, actor, detail)
                SELECT 'com.paging', 'note', 'test', 'row ' || g FROM generate_series(1, 1205) g
                """,
                logger: CLIFixture.logger
            ).collect()
            _ = try await fixture.database.client.query(
                "INSERT INTO revoker.audit_events (client_id, event, actor, detail) VALUES ('com.formula', 'note', 'test', '=HYPERLINK(\"http://evil\",\"x\")')",
                logger: CLIFixture.logger
            ).collect()

            let all = try await fixture.run(["audit", "--client-id", "com.paging", "--format", "csv", "--limit", "5000"])
            #expect(all.status == 0, "\(all.stderr)")
            let rows = all.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }.dropFirst()
            #expect(rows.count == 1205)
            #expect(Set(rows.map { $0.components(separatedBy: ",")[0] }).count == 1205, "a row repeated across pages")
            #expect(!all.stderr.contains("more match"))

            let limited = try await fixture.run(["audit", "--client-id", "com.paging", "--format", "json", "--limit", "1100"])
            #expect(limited.status == 0, "\(limited.stderr)")
            #expect((try parseJSON(limited.stdout) as? [Any])?.count == 1100)
            #expect(limited.stderr.contains("more match"))

            let byDefault = try await fixture.run(["audit", "--client-id", "com.paging", "--format", "csv"])
            #expect(byDefault.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 1001)

            let formula = try await fixture.run(["audit", "--client-id", "com.formula", "--format", "csv"])
            #expect(formula.stdout.contains(#""'=HYPERLINK(""http://evil"",""x"")""#), "\(formula.stdout)")
            #expect(!formula.stdout.contains(",=HYPERLINK"))
        }
    }
}
