import AppleSignIn
import AppleSignInSandbox
import AsyncHTTPClient
import Foundation
import GoogleSignIn
import GoogleSignInSandbox
import Logging
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerWorker
import Synchronization

/// The one entry point of the tests: a scratch database (migrated), the Apple sandbox, app keys
/// and configuration files, the loaded configuration and a queue; and, when asked, the program
/// itself running (the API, the worker) as `RevokerApp` assembles it for `revoker serve`.
///
/// Modelled on HummingbirdTesting's `app.test(.router | .live)`: the same body runs against the
/// store alone or against a live server, and the secrets a test handled are searched for in the
/// captured logs when it ends.
public struct RevokerTestStack: Sendable {
    /// A fresh database with every migration applied; dropped afterwards.
    public let database: ScratchDatabase
    /// The sandbox standing in for Apple, with every app registered.
    public let sandbox: RunningSandbox
    /// The app keys, sealing key and configuration file, as an operator lays them out.
    public let files: LocalConfiguration
    /// The configuration loaded from ``files`` and the environment, as `revoker` loads it.
    public let configuration: RevokerConfiguration
    /// A queue on ``database`` that seals with the configured keys and logs into ``logs``.
    public let queue: RevocationQueue
    /// Every line logged through ``logger``.
    public let logs: CapturingLogHandler.Storage
    /// A logger capturing into ``logs``.
    public let logger: Logger
    /// `http://127.0.0.1:PORT` of the running API, when the stack serves it.
    public let apiBaseURL: String?

    /// Everything the tests enqueued, to search logs and audit rows for.
    public let secrets = Secrets()

    public final class Secrets: Sendable {
        private let values = Mutex<[String]>([])
        public func add(_ value: String) { values.withLock { $0.append(value) } }
        public var all: [String] { values.withLock { $0 } }
    }

    /// The apps a stack has unless a test names others: two Apple apps.
    public static let defaultApps: [ProviderName: [String]] = [.apple: ["com.example.notes", "com.example.photos"]]

    /// Sets the stack up, runs `body`, and takes it down (also when `body` throws).
    ///
    /// - Parameters:
    ///   - apps: each provider's apps (client IDs), configured and registered with its sandbox; a
    ///     provider named here replaces its ``defaultApps``, the others keep theirs.
    ///   - worker: `worker` settings for the configuration file.
    ///   - http: `http` settings for the configuration file.
    ///   - settings: further top-level settings for the configuration file (`webhooks`, …).
    ///   - sandbox: the sandbox's faults and lifetimes.
    ///   - google: the Google sandbox's, likewise.
    ///   - server: another PostgreSQL server's URL (default: `DATABASE_URL`).
    ///   - serving: the parts of the program to run around `body` (`.api`, `.worker`); none by default.
    public static func with<T: Sendable>(
        apps: [ProviderName: [String]] = [:],
        worker: [String: any Sendable] = [:],
        http: [String: any Sendable] = [:],
        settings: [String: any Sendable] = [:],
        sandbox sandboxConfiguration: AppleSandbox.Configuration = .init(),
        google googleConfiguration: GoogleSandbox.Configuration = .init(),
        server: String? = nil,
        serving: RevokerApp.Parts = [],
        _ body: (RevokerTestStack) async throws -> T
    ) async throws -> T {
        try await LocalStack.with(
            apps: defaultApps.merging(apps) { $1 },
            worker: worker,
            http: http,
            settings: settings,
            sandbox: sandboxConfiguration,
            google: googleConfiguration,
            server: server
        ) { local in
            let (database, sandbox, files, configuration) = (local.database, local.sandbox, local.files, local.configuration)
            let logs = CapturingLogHandler.Storage()
            let logger = CapturingLogHandler.logger(label: "revoker.test", storage: logs)
            let queue = RevocationQueue(client: database.client, sealer: configuration.sealer, logger: logger)
            func stack(apiPort: Int?) -> RevokerTestStack {
                RevokerTestStack(
                    database: database,
                    sandbox: sandbox,
                    files: files,
                    configuration: configuration,
                    queue: queue,
                    logs: logs,
                    logger: logger,
                    apiBaseURL: apiPort.map { "http://127.0.0.1:\($0)" }
                )
            }
            let result: T
            let used: RevokerTestStack
            if serving.isEmpty {
                used = stack(apiPort: nil)
                result = try await body(used)
            } else {
                let app = try await RevokerApp(configuration: configuration, parts: serving, logger: logger)
                (result, used) = try await app.withRunning { running in
                    let live = stack(apiPort: running.apiPort)
                    return (try await body(live), live)
                }
            }
            try used.expectNoSecretsInLogs()
            return result
        }
    }

    /// A user signs in and the app later asks to delete them: mints a grant in the sandbox and enqueues it.
    @discardableResult
    public func enqueue(
        provider: ProviderName = .apple,
        clientID: String,
        reference: String,
        kind: CredentialKind,
        subject: String? = nil,
        userID: String? = nil,
        redirectURI: String? = nil,
        maxAttempts: Int? = nil
    ) async throws -> (request: RevocationRequest, grantID: String, secret: String) {
        let subject = subject ?? "sub-\(reference)"
        let minted: SandboxAdmin.Minted
        switch (provider, kind) {
        case (.google, .authorizationCode):
            minted = try await sandbox.google.mintCode(.init(clientID: clientID, subject: subject, redirectURI: redirectURI))
        case (_, .authorizationCode): minted = try await sandbox.admin.mintCode(clientID: clientID, subject: subject, redirectURI: redirectURI)
        case (_, .accessToken): minted = try await sandbox.admin(for: provider).mintAccessToken(clientID: clientID, subject: subject)
        default: minted = try await sandbox.admin(for: provider).mintRefreshToken(clientID: clientID, subject: subject)
        }
        secrets.add(minted.value)
        let result = try await queue.enqueue(
            try NewRevocation(
                provider: provider.rawValue,
                clientID: clientID,
                externalReference: reference,
                userID: userID,
                credential: Credential(kind: kind, secret: minted.value),
                redirectURI: redirectURI,
                maxAttempts: maxAttempts ?? configuration.worker.maxAttempts
            ),
            actor: "test"
        )
        return (result.request, minted.grantID, minted.value)
    }

    /// Enqueues `count` refresh tokens with references `prefix0`, `prefix1`, …; returns their grant ids.
    public func enqueueMany(
        clientID: String,
        prefix: String,
        count: Int,
        kind: (Int) -> CredentialKind = { _ in .refreshToken }
    ) async throws -> [String] {
        var grants: [String] = []
        for index in 0..<count {
            grants.append(try await enqueue(clientID: clientID, reference: "\(prefix)\(index)", kind: kind(index)).grantID)
        }
        return grants
    }

    /// Runs a worker in drain mode until nothing is due (or `deadline` passes), and returns its report.
    public func drain(
        configuration: RevokerConfiguration? = nil,
        deadline: Duration = .seconds(120),
        concurrency: Int? = nil
    ) async throws -> WorkerReport {
        var configuration = configuration ?? self.configuration
        if let concurrency { configuration.worker.concurrency = concurrency }
        let app = try await RevokerApp(configuration: configuration, parts: .worker, workerMode: .drain(deadline: .now + deadline), logger: logger)
        try await app.run()
        guard let worker = app.worker else { throw RevokerAppError(.configuration, "the app was built without its worker") }
        return worker.report()
    }

    /// Drains again and again until every request has an outcome that `done` accepts: a drain
    /// ends when nothing is due, and on a loaded machine a paused app's probe may fall after it.
    public func drainUntil(_ done: @escaping (RevocationRequest) -> Bool) async throws {
        try await eventually("every request done after a drain") {
            _ = try await drain()
            return try await requests().allSatisfy(done)
        }
    }

    /// Every request, newest last.
    public func requests() async throws -> [RevocationRequest] {
        try await queue.list(RevocationFilter(limit: 1000)).sorted { $0.createdAt < $1.createdAt }
    }

    /// The whole audit trail.
    public func audit() async throws -> [AuditRecord] {
        var records: [AuditRecord] = []
        var cursor: String?
        repeat {
            let page = try await AuditLog(client: database.client, logger: logger).query(AuditQuery(cursor: cursor, limit: 1000))
            records += page.records
            cursor = page.nextCursor
        } while cursor != nil
        return records
    }

    /// Takes `count` grants of one account into custody as a worker leaves them once their
    /// provider proved them: live refresh tokens minted at the sandbox, sealed and held, each bound
    /// to its user (`<reference>-user-<n>`). A fixture for tests of scale (thousands of grants)
    /// that registering one by one would spend their time on; it writes no registration trail.
    /// Returns the sandbox's grant ids.
    public func holdMany(provider: ProviderName = .apple, clientID: String, accountReference: String, count: Int) async throws -> [String] {
        let minted = try await withThrowingTaskGroup(of: (Int, SandboxAdmin.Minted).self) { group in
            var next = 0
            var minted: [SandboxAdmin.Minted?] = Array(repeating: nil, count: count)
            func add() {
                guard next < count else { return }
                let (index, subject) = (next, "\(accountReference)-user-\(next)")
                next += 1
                group.addTask {
                    (index, try await sandbox.admin(for: provider).mintRefreshToken(clientID: clientID, subject: subject))
                }
            }
            for _ in 0..<16 { add() }
            while let (index, token) = try await group.next() {
                minted[index] = token
                add()
            }
            return minted.compactMap { $0 }
        }
        _ = try await hold(
            minted.enumerated().map { (accountReference, "\(accountReference)-user-\($0.offset)", $0.element.value) },
            provider: provider,
            clientID: clientID
        )
        return minted.map(\.grantID)
    }

    /// Writes `grants` into custody as held, each token sealed for its grant and bound to its
    /// user, as a worker leaves them once their provider proved them (the provider is not asked:
    /// for tests of what is held, not of how it came to be). Returns the grants' ids.
    public func hold(
        _ grants: [(reference: String, user: String, token: String)],
        provider: ProviderName = .apple,
        clientID: String
    ) async throws -> [UUID] {
        var all: [UUID] = []
        for start in stride(from: 0, to: grants.count, by: 1000) {
            var (ids, references, users, sealed, keys, digests) = ([UUID](), [String](), [String](), [String](), [String](), [String]())
            for grant in grants[start..<min(start + 1000, grants.count)] {
                secrets.add(grant.token)
                let id = UUID()
                let credential = Credential(kind: .refreshToken, secret: grant.token)
                let seal = try configuration.sealer.seal(credential, grantID: id)
                ids.append(id)
                references.append(grant.reference)
                users.append(grant.user)
                sealed.append(Data(seal.bytes).base64EncodedString())
                keys.append(seal.keyID)
                digests.append(credential.digest.map { String(format: "%02x", $0) }.joined())
            }
            _ = try await database.client.query(
                """
                INSERT INTO revoker.grants
                    (id, provider, client_id, account_reference, user_id, user_source, registered_kind, registered_digest,
                     state, sealed_token, token_key_id, held_at)
                SELECT g.id, \(provider.rawValue), \(clientID), g.reference, g.user_id, 'verified_id_token', 'refresh_token',
                       decode(g.digest, 'hex'), 'held', decode(g.sealed, 'base64'), g.key_id, now()
                FROM unnest(\(ids)::uuid[], \(references)::text[], \(users)::text[], \(sealed)::text[], \(keys)::text[], \(digests)::text[])
                     AS g(id, reference, user_id, sealed, key_id, digest)
                """,
                logger: logger
            ).collect()
            all += ids
        }
        return all
    }

    /// The environment for a `revoker` process using this harness's database, sandbox and apps.
    public var environment: [String: String] {
        files.environment(databaseURL: database.url, sandbox: sandbox)
    }

    /// Fails when `text` (a process's output) contains a token, a code or a private key.
    public func expectNoSecrets(in text: String) throws {
        if SecretScanner(secrets.all + files.secretTexts).foundAny(in: text) {
            throw LeakedSecret(where: "process output")
        }
    }

    /// Counts requests by state, straight from the database.
    public func count(state: RevocationState) async throws -> Int {
        let rows = try await database.client.query(
            "SELECT count(*)::int FROM revoker.revocation_requests WHERE state = \(state.rawValue)",
            logger: logger
        ).collect()
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Fails when any captured log line contains a token, a code or a private key.
    public func expectNoSecretsInLogs() throws {
        if SecretScanner(secrets.all + files.secretTexts).foundAny(in: logs.all.joined(separator: "\n")) {
            throw LeakedSecret(where: "log output")
        }
    }

    /// Fails when any audit row contains a token, a code or a private key.
    public func expectNoSecretsInAudit() async throws {
        let rows = try await audit().map { "\($0)" }
        if SecretScanner(secrets.all).foundAny(in: rows.joined(separator: "\n")) {
            throw LeakedSecret(where: "the audit trail")
        }
    }

    public struct LeakedSecret: Error, CustomStringConvertible {
        public var `where`: String
        public var description: String { "a secret appeared in \(self.where)" }
    }
}
