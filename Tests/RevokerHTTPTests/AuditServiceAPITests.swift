import AppleSignInSandbox
import Foundation
import Hummingbird
import Logging
import NIOHTTP1
import PostgresNIO
import Prometheus
import ProviderSandbox
import RevokerApp
import RevokerEvidence
import RevokerHTTP
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing
import Yams

/// The audit endpoint, the service endpoints and the OpenAPI contract.
@Suite("HTTP API: audit, health, metrics, contract")
struct AuditServiceAPITests {
    @Test func theAuditTrailVerifiesOverHTTPAndNamesARowChangedBehindItsBack() async throws {
        try await APIHarness.with { api in
            let (_, token) = try await api.mintRefreshToken(subject: "apple-user-7")
            let created = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                json: ["client_id": "com.example.notes", "external_reference": "acct-7", "refresh_token": token]
            )
            #expect(created.status == 202)
            #expect(try await api.call(.GET, "/v1/audit/verify", key: api.keys.reader).status == 403)
            #expect(try await api.call(.GET, "/v1/audit/verify", key: nil).status == 401)
            let clean = try await api.call(.GET, "/v1/audit/verify", key: api.keys.auditor)
            #expect(clean.status == 200)
            #expect(clean.json["intact"] as? Bool == true, "\(clean.text)")
            #expect((clean.json["rows_checked"] as? Int ?? 0) >= 1)
            // A key for one app verifies that app's chains, and must say which.
            #expect(try await api.call(.GET, "/v1/audit/verify", key: api.keys.notesOnly).status == 400)
            #expect(try await api.call(.GET, "/v1/audit/verify?client_id=com.example.photos", key: api.keys.notesOnly).status == 403)
            let mine = try await api.call(.GET, "/v1/audit/verify?client_id=com.example.notes", key: api.keys.notesOnly)
            #expect(mine.json["intact"] as? Bool == true)
            #expect(try await api.call(.GET, "/v1/audit/verify?since=yesterday", key: api.keys.auditor).status == 400)

            let rows = try await api.stack.database.client.query("SELECT id FROM revoker.audit_events ORDER BY id LIMIT 1").collect()
            let id = try #require(try rows.first?.decode(Int64.self))
            try await api.stack.database.client.withTransaction(logger: Logger(label: "tamper")) { connection in
                _ = try await connection.query("SET LOCAL session_replication_role = replica", logger: Logger(label: "tamper")).collect()
                _ = try await connection.query(
                    "UPDATE revoker.audit_events SET actor = 'someone-else' WHERE id = \(id)",
                    logger: Logger(label: "tamper")
                )
                .collect()
            }
            let tampered = try await api.call(.GET, "/v1/audit/verify", key: api.keys.auditor)
            #expect(tampered.status == 200)
            #expect(tampered.json["intact"] as? Bool == false)
            let problems = try #require(tampered.json["problems"] as? [[String: Any]])
            #expect(problems.contains { $0["kind"] as? String == "changed" && ($0["rows"] as? [Int] ?? []).contains(Int(id)) }, "\(tampered.text)")
        }
    }

    @Test func aRevocationsReceiptComesSignedAndVerifiesWithThePublicKey() async throws {
        try await APIHarness.with(runWorker: true) { api in
            let (_, token) = try await api.mintRefreshToken(subject: "apple-user-8")
            let created = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                json: ["client_id": "com.example.notes", "external_reference": "acct-8", "refresh_token": token]
            )
            let id = try #require(created.json["id"] as? String)
            try await eventually("the request succeeded") {
                try await api.call(.GET, "/v1/revocations/\(id)", key: api.keys.reader).json["state"] as? String == "succeeded"
            }
            #expect(try await api.call(.GET, "/v1/revocations/\(id)/receipt", key: api.keys.reader).status == 403)
            let answer = try await api.call(.GET, "/v1/revocations/\(id)/receipt", key: api.keys.auditor)
            #expect(answer.status == 200, "\(answer.text)")
            let verified = AuditReceipt.verify(answer.body, keys: api.stack.configuration.audit.verificationKeys)
            #expect(verified.valid, "\(verified.problems)")
            #expect(verified.receipt?.summary.outcome == "revoked")
            let page = try await api.call(.GET, "/v1/revocations/\(id)/receipt", key: api.keys.auditor, accept: "text/html")
            #expect(page.status == 200)
            #expect(page.text.contains("acct-8") && page.text.contains("Calls to Apple"))
            #expect(try await api.call(.GET, "/v1/revocations/\(UUID().uuidString)/receipt", key: api.keys.auditor).status == 404)
        }
    }

    @Test func enqueueOverHTTPIsRevokedByTheInProcessWorkerAndShowsInAuditAndMetrics() async throws {
        let worker: [String: any Sendable] = [
            "poll_interval_seconds": 0.2, "retry_base_seconds": 0.1, "retry_cap_seconds": 1, "max_requests_per_second": 500,
        ]
        try await APIHarness.with(runWorker: true, worker: worker) { api in
            let (grantID, token) = try await api.mintRefreshToken(subject: "apple-user-9")
            let created = try await api.call(
                .POST,
                "/v1/revocations",
                key: api.keys.writer,
                json: [
                    "client_id": "com.example.notes", "external_reference": "acct-9", "apple_user_id": "apple-user-9", "refresh_token": token,
                ]
            )
            #expect(created.status == 202)
            let id = try #require(created.json["id"] as? String)

            let shown = try await eventuallyValue("the request succeeded") {
                let shown = try await api.call(.GET, "/v1/revocations/\(id)", key: api.keys.reader)
                return shown.json["state"] as? String == "succeeded" ? shown : nil
            }
            #expect(shown.json["outcome"] as? String == "revoked", "\(shown.text)")
            #expect(shown.json["has_credential"] as? Bool == false, "the credential is erased once final")
            #expect(try await api.stack.sandbox.admin.grant(grantID).revocations == 1, "Apple revoked the grant once")

            let audit = try await api.call(.GET, "/v1/audit?request_id=\(id)", key: api.keys.auditor)
            let events = try #require(audit.json["records"] as? [[String: Any]]).compactMap { $0["event"] as? String }
            for event in ["enqueued", "claimed", "token_validated", "id_token_verified", "revoked", "succeeded", "credential_erased"] {
                #expect(events.contains(event), "the audit trail shows \(event): \(events)")
            }

            let metrics = try await api.call(.GET, "/metrics", key: nil).text
            #expect(metrics.contains(#"revoker_requests_enqueued_total{source="http"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"revoker_requests_finished_total{outcome="revoked",provider="apple",client_id="com.example.notes"} 1"#))
            #expect(metrics.contains(#"revoker_attempts_total{provider="apple",client_id="com.example.notes"} 1"#))
            // The pipeline's database calls are timed.
            #expect(metrics.contains(#"revoker_database_call_duration_seconds_count{caller="worker",result="ok"}"#))
            #expect(metrics.contains(#"revoker_apple_request_duration_seconds_count{endpoint="/auth/revoke",status_class="2xx"} 1"#))
            #expect(metrics.contains(#"revoker_queue_depth{state="succeeded"} 1"#))
            #expect(metrics.contains(#"revoker_http_request_duration_seconds_count{route="/v1/revocations",method="POST",status="202"} 1"#))
            #expect(!metrics.contains(id), "no request id in a label")
            // The configured outbound limit, and the calls this process made, published every second.
            #expect(metrics.contains(#"revoker_provider_rate_limit_per_second{client_id="*"} 500"#), "\(metrics)")
            try await eventually("the calls this process made in the metrics", every: .milliseconds(200)) {
                try await api.call(.GET, "/metrics", key: nil).text.contains(#"revoker_provider_calls_per_second{client_id="com.example.notes"}"#)
            }
            try await api.stack.expectNoSecretsInAudit()
        }
    }

    @Test func auditPagesWithACursorAndExportsCSV() async throws {
        try await APIHarness.with { api in
            for index in 0..<3 {
                let token = try await api.mintRefreshToken(subject: "s\(index)").token
                _ = try await api.call(
                    .POST,
                    "/v1/revocations",
                    key: api.keys.writer,
                    json: [
                        "client_id": "com.example.notes", "external_reference": "page-\(index)", "refresh_token": token,
                    ]
                )
                _ = try await api.call(.POST, "/v1/revocations/\(UUID())/cancel", key: api.keys.writer)
            }
            let everything = try await api.stack.audit()
            var seen: [Int64] = []
            var cursor: String?
            var pages = 0
            repeat {
                let path =
                    "/v1/audit?client_id=com.example.notes&limit=2"
                    + (cursor.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)" } ?? "")
                let page = try await api.call(.GET, path, key: api.keys.auditor)
                #expect(page.status == 200, "\(page.text)")
                seen += (page.json["records"] as? [[String: Any]] ?? []).compactMap { ($0["id"] as? NSNumber)?.int64Value }
                cursor = page.json["next_cursor"] as? String
                #expect(page.headers.first(name: "Revoker-Next-Cursor") == cursor)
                pages += 1
            } while cursor != nil && pages < 10
            #expect(seen == everything.map(\.id), "the pages hold every record once, in order")
            #expect(pages == 2)

            let csv = try await api.call(.GET, "/v1/audit?event=enqueued", key: api.keys.auditor, accept: "text/csv")
            #expect(csv.headers.first(name: "Content-Type")?.hasPrefix("text/csv") == true)
            let lines = csv.text.split(separator: "\r\n")
            #expect(lines.first == Substring(AuditRecord.exportColumns.joined(separator: ",")))
            #expect(lines.count == 4, "a header and three enqueued events: \(csv.text)")

            for cursor in ["garbage", "v1.1", "v1.-1.2", "v1.1.1234567890123456789", "v2.1.2", "v1.%EF%BC%91.2"] {
                #expect(try await api.call(.GET, "/v1/audit?cursor=\(cursor)", key: api.keys.auditor).status == 400, "\(cursor)")
            }
            #expect(try await api.call(.GET, "/v1/audit?event=exploded", key: api.keys.auditor).status == 400)
            #expect(try await api.call(.GET, "/v1/audit?from=tuesday", key: api.keys.auditor).status == 400)
        }
    }

    @Test func healthAndReadiness() async throws {
        try await APIHarness.with { api in
            let alive = try await api.call(.GET, "/healthz", key: nil)
            #expect(alive.status == 200 && alive.json["status"] as? String == "alive")
            let ready = try await api.call(.GET, "/readyz", key: nil)
            #expect(ready.status == 200 && ready.json["status"] as? String == "ready")
            _ = try await api.stack.database.client.query("UPDATE revoker.schema_migrations SET checksum = 'changed'", logger: api.stack.logger)
                .collect()
            let stale = try await api.call(.GET, "/readyz", key: nil)
            #expect(stale.status == 503, "a schema that does not match this binary is not ready: \(stale.text)")
        }
    }

    @Test func theRoutesAreExactlyTheOpenAPIDocumentsOperations() async throws {
        let document = try #require(try Yams.load(yaml: String(decoding: RevokerAPI.openAPIDocument, as: UTF8.self)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var documented: Set<String> = []
        for (path, operations) in paths {
            for method in operations.keys where ["get", "post", "put", "patch", "delete"].contains(method) {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        try await APIHarness.with { api in
            let repository = PrivatePostgres.packageRoot.appendingPathComponent("openapi.yaml")
            #expect(try Data(contentsOf: repository) == Data(RevokerAPI.openAPIDocument), "the repository's openapi.yaml is the served one")
            let served = try await api.call(.GET, "/openapi.yaml", key: nil)
            #expect(served.body == Data(RevokerAPI.openAPIDocument))
        }
        let routes = Set(try await routeList().map { "\($0.method) \($0.path)" })
        #expect(routes == documented, "only in the code: \(routes.subtracting(documented)); only in the document: \(documented.subtracting(routes))")
    }

    /// The router's routes, from the API as the assembly builds it (never run, so its client never connects).
    func routeList() async throws -> [(method: String, path: String)] {
        // No provider: one would bring a client for its keys, which must be run to be shut down.
        let configuration = RevokerConfiguration(
            databaseURL: "postgres://nobody@127.0.0.1:9/none",
            keyring: try CredentialKeyring(parsing: CredentialKeyring.generateEntry(keyID: "routes"))
        )
        let app = try await RevokerApp(configuration: configuration, parts: .api, logger: Logger(label: "routes"))
        let api = try #require(app.api)
        return api.router().routes.map { ($0.method.rawValue, $0.path.description) }
    }
}
