import AppleSignIn
import AppleSignInSandbox
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import Logging
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerWorker

/// The whole story on this machine, for `revoker demo`: in-process Apple and Google sandboxes
/// with two Apple apps and a Google app, a realistic mix of deletions enqueued (codes with and
/// without `redirect_uri`, refresh and access tokens, an already revoked token, another user's
/// token, a used code, one enqueue through SQL inside a transaction, an account with an Apple
/// and a Google grant), drained, and each outcome and the audit trail shown; then custody:
/// grants held from sign-in, one ended by Apple's notification, accounts deleted by reference
/// alone. Nothing reaches Apple or Google.
public struct Demo: Sendable {
    let databaseURL: String
    let logger: Logger
    let output: @Sendable (String) -> Void

    /// - Parameter output: receives each line to show.
    public init(databaseURL: String, logger: Logger, output: @escaping @Sendable (String) -> Void) {
        self.databaseURL = databaseURL
        self.logger = logger
        self.output = output
    }

    /// Runs the demo; returns how many requests did not end as expected (0 when all did).
    public func run() async throws -> Int {
        try await RunningSandbox.with { sandbox in
            let files = try LocalConfiguration(
                apps: [
                    .apple: ["com.example.notes", "com.example.photos.web"], .google: ["1000-notes.apps.googleusercontent.com"],
                    LocalProvider.facebook.name: ["1000000000000777"],
                ],
                worker: ["retry_base_seconds": 0.2]
            )
            defer { try? FileManager.default.removeItem(at: files.directory) }
            try await files.register(with: sandbox)
            let configuration = try RevokerConfiguration.load(
                file: files.configFile,
                environment: files.environment(databaseURL: databaseURL, sandbox: sandbox)
            )
            let apple = files.clientIDs(.apple)
            let google = files.clientIDs(.google)[0]
            section(
                "1. Apple sandbox on \(sandbox.baseURL), Google's on \(sandbox.googleBaseURL); Apple apps \(apple[0]) and \(apple[1]) registered with fresh keys, Google client \(google) with a fresh secret"
            )
            try await migrate(configuration)
            let scenarios = try await enqueue(Self.mix, configuration: configuration, sandbox: sandbox, apple: apple, google: google)
            guard try await drain(configuration) else { return 1 }
            let surprises = try await showOutcomes(of: scenarios, configuration: configuration, sandbox: sandbox)
            let told = try await accountDeletion(configuration: configuration, sandbox: sandbox, clientID: apple[0])
            let held = try await custody(configuration: configuration, sandbox: sandbox, apple: apple[0], google: google)
            let facebook = try await facebook(
                configuration: configuration,
                sandbox: sandbox,
                app: files.clientIDs(LocalProvider.facebook.name)[0]
            )
            let missed = surprises + told + held + facebook
            section(missed == 0 ? "Every request and grant ended as expected." : "\(missed) request(s) or grant(s) did not end as expected.")
            return missed
        }
    }

    /// Applies the migrations.
    func migrate(_ configuration: RevokerConfiguration) async throws {
        try await RevokerApp(configuration: configuration, requireCurrentSchema: false, logger: logger).withRunning { running in
            let applied = try await running.app.migrate()
            section(
                "2. Migrated the revoker schema (\(applied.isEmpty ? "already current" : "applied \(applied.map(String.init).joined(separator: ", "))"))"
            )
        }
    }

    /// Drains the queue once with a worker; false when the worker was not built.
    func drain(_ configuration: RevokerConfiguration) async throws -> Bool {
        let drain = try await RevokerApp(
            configuration: configuration,
            parts: .worker,
            workerMode: .drain(deadline: .now + .seconds(120)),
            logger: logger
        )
        try await drain.run()
        guard let report = drain.worker?.report() else { return false }
        section("4. Drained: \(report.succeeded) succeeded, \(report.failed) failed, \(report.retriesScheduled) retries")
        return true
    }

    /// Each scenario's outcome beside the one expected and the provider's record of the grant,
    /// then the audit trail; returns how many did not end as expected (a token in the trail counts once).
    func showOutcomes(of scenarios: [Scenario], configuration: RevokerConfiguration, sandbox: RunningSandbox) async throws -> Int {
        try await RevokerApp(configuration: configuration, requireCurrentSchema: false, logger: logger).withRunning { running in
            let requests = try await running.app.queue.list(RevocationFilter(limit: 100))
            output("   \(pad("reference", 10)) \(pad("via", 7)) \(pad("outcome", 17)) \(pad("expected", 17)) the provider's record of the grant")
            var surprises = 0
            for scenario in scenarios {
                let request = requests.first { $0.externalReference == scenario.reference && $0.provider == scenario.provider.rawValue }
                let grant = try await sandbox.admin(for: scenario.provider).grant(scenario.grantID)
                let outcome = request?.outcome?.rawValue ?? request?.state.rawValue ?? "missing"
                if outcome != scenario.expected.rawValue { surprises += 1 }
                let record = "revoked=\(grant.revoked) code_exchanges=\(grant.codeExchanges) validations=\(grant.validations)"
                output(
                    "   \(pad(scenario.reference, 10)) \(pad(scenario.provider.rawValue, 7)) \(pad(outcome, 17)) \(pad(scenario.expected.rawValue, 17)) \(record)"
                )
            }
            return try await surprises + showAuditTrail(of: scenarios, database: running.database)
        }
    }

    /// The audit trail, one block per request; returns 1 when a code or token appears in it.
    func showAuditTrail(of scenarios: [Scenario], database: PostgresClient) async throws -> Int {
        let audit = try await AuditLog(client: database, logger: logger).query(AuditQuery(limit: 1000))
        let leaked = audit.records.filter { record in
            let text = [record.detail, record.providerErrorDescription, record.providerError, record.actor].compactMap { $0 }.joined(separator: " ")
            return scenarios.contains { text.contains($0.secret) }
        }
        section(
            "5. The audit trail, by request (\(audit.records.count) events; \(leaked.isEmpty ? "checked: no code or token appears in it" : "A TOKEN APPEARS IN \(leaked.count) EVENTS"))"
        )
        // One block per request, in the order the scenarios name their references: an
        // account's Apple and Google requests are two blocks, not one interleaved list.
        let byRequest = Dictionary(grouping: audit.records, by: \.requestID)
        let references = scenarios.map(\.reference)
        let blocks = byRequest.values.sorted { a, b in
            let (left, right) = (
                references.firstIndex(of: a[0].externalReference ?? "") ?? .max,
                references.firstIndex(of: b[0].externalReference ?? "") ?? .max
            )
            return left != right ? left < right : a[0].id < b[0].id
        }
        for records in blocks where references.contains(records[0].externalReference ?? "") {
            let first = records[0]
            output(
                "   request \(first.requestID.map { String($0.uuidString.lowercased().prefix(8)) } ?? "-") \(first.externalReference ?? "-") \(first.clientID ?? "")"
            )
            for record in records {
                let apple = [record.providerEndpoint, record.httpStatus.map(String.init), record.providerError].compactMap { $0 }.joined(
                    separator: " "
                )
                output(
                    "     \(record.occurredAt.formatted(.iso8601.time(includingFractionalSeconds: true))) \(pad(record.event, 18)) \(pad(apple, 28)) \(record.detail ?? "")"
                )
            }
        }
        return leaked.isEmpty ? 0 : 1
    }

    /// A user with a deletion still queued deletes their Apple account: Apple notifies the API,
    /// the request ends without a call, and the app backend reads both events from the feed.
    /// Returns 1 when that did not happen.
    func accountDeletion(configuration: RevokerConfiguration, sandbox: RunningSandbox, clientID: String) async throws -> Int {
        var configuration = configuration
        configuration.http.port = 0
        let (output, logger) = (self.output, self.logger)
        return try await RevokerApp(configuration: configuration, parts: .api, logger: logger).withRunning { running in
            let subject = "000042.demo"
            let minted = try await sandbox.admin.mintRefreshToken(clientID: clientID, subject: subject)
            let queued = try await running.app.queue.enqueue(
                try NewRevocation(
                    clientID: clientID,
                    externalReference: "user-1042",
                    userID: subject,
                    credential: Credential(kind: .refreshToken, secret: minted.value)
                ),
                actor: "demo"
            )
            let delivery = try await sandbox.admin.sendNotification(
                .init(
                    url: "http://127.0.0.1:\(running.apiPort ?? 0)/v1/apple/notifications",
                    clientID: clientID,
                    subject: subject,
                    type: "account-delete"
                )
            )
            section("6. User 000042.demo deletes their Apple account while user-1042's deletion waits in the queue")
            output("   Apple → POST /v1/apple/notifications (account-delete, signed RS256): Revoker answered \(delivery.status) \(delivery.body)")
            let ended = try await running.app.queue.request(id: queued.request.id)
            output("   user-1042: \(ended?.state.rawValue ?? "missing")/\(ended?.outcome?.rawValue ?? "-"), no call to Apple")
            // The backend reads the feed; an event shows once older transactions have ended.
            let feed = EventFeed(client: running.database, logger: logger)
            var events: [OutboxEvent] = []
            let deadline = ContinuousClock.now + .seconds(60)
            while events.count < 2, ContinuousClock.now < deadline {
                events = try await feed.events(after: nil, clientIDs: [clientID], limit: 1000).filter { $0.userID == subject }
                if events.count < 2 { try await Task.sleep(for: .milliseconds(100)) }
            }
            output("   The app backend's event feed (GET /v1/events, revoker events) now holds:")
            for event in events { output("   \(event.json)") }
            let told = Set(events.map(\.type)) == ["apple.account_deleted", "revocation.succeeded"]
            return delivery.status == 200 && ended?.outcome == .revokedByUser && told ? 0 : 1
        }
    }

    func section(_ title: String) {
        output("\n== \(title)")
    }

    func pad(_ text: String, _ width: Int) -> String {
        text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0)
    }
}
