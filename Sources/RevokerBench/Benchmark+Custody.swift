import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import Foundation
import GoogleSignInSandbox
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import PostgresNIO
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension Benchmark {
    // MARK: Custody

    /// Accounts sign in with three grants each (two Apple apps and Google) and the backend
    /// registers every code at once (`POST /v1/grants`, `concurrency` callers) while one `revoker
    /// work` process exchanges them; then accounts are deleted by reference, one at a time, each
    /// timed from `POST /v1/accounts/{reference}/deletion` until its `account.deletion_completed`
    /// is in the event feed; the rest are deleted together. With `kill`, the worker is SIGKILLed
    /// in each phase (once a third is done) and another started: no grant may be lost and none
    /// revoked twice. Valid when every grant was held (or, for a code the killed worker was
    /// exchanging, ended `exchange_lost`), every deletion ended `revoked`, every held grant was
    /// revoked at its provider exactly once and every code exchanged once.
    func measureCustody(latency: Int, kill: Bool) async throws -> BenchmarkReport.Custody {
        let concurrency = options.concurrency(atLatency: latency)
        let worker: [String: any Sendable] = ["concurrency": concurrency, "batch_size": min(options.batchSize, concurrency)]
        return try await withStage(latency: latency, worker: worker, mixed: true) { stage in
            let accounts = kill ? options.custodyKillAccounts : options.custodyAccounts
            let apps = [(ProviderName.apple, Self.apps[0]), (.apple, Self.apps[1]), (.google, Self.googleApp)]
            let codes = try await concurrently(accounts * apps.count, width: 16) { index in
                let (provider, clientID) = apps[index % apps.count]
                let subject = "custody-\(index / apps.count)"
                let minted =
                    provider == .google
                    ? try await stage.sandbox.google.mintCode(.init(clientID: clientID, subject: "1100\(index / apps.count)"))
                    : try await stage.sandbox.admin.mintCode(clientID: clientID, subject: subject)
                return (provider: provider, clientID: clientID, account: "account-\(index / apps.count)", code: minted)
            }
            let apiKey = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
            var configuration = stage.configuration
            configuration.http.port = 0
            configuration.http.apiKeys = [
                .init(name: "bench", sha256: Array(SHA256.hash(data: Data(apiKey.utf8))), scopes: [.grantsWrite, .revocationsWrite])
            ]
            var problems: [String] = []
            let workers = WorkerRelay(binary: options.binary, environment: stage.environment)
            try workers.start()
            let app = try await RevokerApp(configuration: configuration, parts: .api, logger: logger)
            do {
                let report = try await measure(app)
                await workers.stop()
                return report
            } catch {
                await workers.stop()
                throw error
            }
            func measure(_ app: RevokerApp) async throws -> BenchmarkReport.Custody {
                try await app.withRunning { running in
                    let api = BenchAPI(port: running.apiPort ?? 0, key: apiKey, width: options.enqueueConcurrency)
                    defer { api.shutdown() }
                    let killAt = kill ? codes.count / 3 : -1
                    let done = Counter()
                    let started = ContinuousClock.now
                    let registrations = try await concurrently(codes.count, width: options.enqueueConcurrency) { index in
                        let code = codes[index]
                        let body: [String: Any] = [
                            "provider": code.provider.rawValue, "client_id": code.clientID, "account_reference": code.account,
                            "authorization_code": code.code.value,
                        ]
                        let (status, _, milliseconds) = try await api.send(.POST, "/v1/grants", body)
                        if done.increment() == killAt { try await workers.killAndReplace() }
                        return (status, milliseconds)
                    }
                    let registrationSeconds = (ContinuousClock.now - started).timeInterval
                    let unexpected = registrations.filter { ![200, 201, 202].contains($0.0) }.map(\.0)
                    if !unexpected.isEmpty { problems.append("\(unexpected.count) registrations answered \(Set(unexpected).sorted())") }
                    let answeredLater = registrations.filter { $0.0 == 202 }.count
                    try await waitUntil("no grant is pending", within: .seconds(options.drainTimeoutSeconds)) {
                        try await countRows("SELECT count(*)::int FROM revoker.grants WHERE state = 'pending'", running.database) == 0
                    }
                    let failed = try await running.database.query(
                        "\(unescaped: Self.marker) SELECT coalesce(end_reason, '?') FROM revoker.grants WHERE state <> 'held'",
                        logger: logger
                    ).collect().map { try $0.decode(String.self) }
                    if failed.contains(where: { !kill || $0 != "exchange_lost" }) {
                        problems.append("\(failed.count) of \(codes.count) grants were not held: \(failed.prefix(5))")
                    }

                    // An account whose every code was lost in a kill holds nothing: its deletion is nothing_held.
                    let holding = try await countRows(
                        "SELECT count(DISTINCT account_reference)::int FROM revoker.grants WHERE state = 'held'",
                        running.database
                    )

                    // Deletions: a sample one at a time (timed), then the rest together.
                    let sampled = min(options.custodyDeletionSamples, accounts)
                    var deletionMilliseconds: [Double] = []
                    for account in 0..<sampled {
                        let reference = "account-\(account)"
                        let asked = ContinuousClock.now
                        let (status, _, _) = try await api.send(.POST, "/v1/accounts/\(reference)/deletion", [:])
                        if status != 202 && status != 201 { problems.append("a deletion answered \(status)") }
                        // Told once completed; an account the kill left holding nothing is told to no app.
                        try await waitUntil("\(reference)'s deletion is told", within: .seconds(options.drainTimeoutSeconds)) {
                            try await countRows(
                                """
                                SELECT count(*)::int FROM revoker.account_deletions d
                                WHERE d.account_reference = \(reference) AND d.state = 'completed'
                                  AND (d.outcome = 'nothing_held' OR EXISTS (
                                      SELECT 1 FROM revoker.events e
                                      WHERE e.type = 'account.deletion_completed' AND e.external_reference = \(reference)))
                                """,
                                running.database
                            ) > 0
                        }
                        deletionMilliseconds.append((ContinuousClock.now - asked).timeInterval * 1000)
                    }
                    let rest = Array(sampled..<accounts)
                    let restKill = kill ? max(1, rest.count / 3) : -1
                    let asked = Counter()
                    _ = try await concurrently(rest.count, width: options.enqueueConcurrency) { index in
                        let (status, _, _) = try await api.send(.POST, "/v1/accounts/account-\(rest[index])/deletion", [:])
                        if asked.increment() == restKill { try await workers.killAndReplace() }
                        return status
                    }
                    try await waitUntil("every deletion completed", within: .seconds(options.drainTimeoutSeconds)) {
                        try await countRows("SELECT count(*)::int FROM revoker.account_deletions WHERE state = 'pending'", running.database) == 0
                    }
                    let outcomes = try await running.database.query(
                        "\(unescaped: Self.marker) SELECT outcome, count(*)::int FROM revoker.account_deletions GROUP BY 1 ORDER BY 1",
                        logger: logger
                    ).collect().map { try $0.decode((String, Int).self) }
                    let expected = [("nothing_held", accounts - holding), ("revoked", holding)].filter { $0.1 > 0 }
                    if outcomes.map(\.0) != expected.map(\.0) || outcomes.map(\.1) != expected.map(\.1) {
                        problems.append("deletions ended \(outcomes), not \(expected)")
                    }
                    let lost = try await running.database.query(
                        "\(unescaped: Self.marker) SELECT registered_digest FROM revoker.grants WHERE end_reason = 'exchange_lost'",
                        logger: logger
                    ).collect().count
                    let reports = try await stage.sandbox.admin.grants() + stage.sandbox.google.grants()
                    let revokedTwice = reports.filter { $0.revocations > 1 }.count
                    let notRevoked = reports.filter { $0.revocations == 0 }.count
                    let exchangedTwice = reports.filter { $0.codeExchanges != 1 }.count
                    if revokedTwice > 0 { problems.append("\(revokedTwice) grants were revoked more than once") }
                    if notRevoked != lost { problems.append("\(notRevoked) grants were never revoked, \(lost) lost in an exchange") }
                    if exchangedTwice > 0 { problems.append("\(exchangedTwice) codes were not exchanged exactly once") }
                    return .init(
                        latencyMilliseconds: latency,
                        killed: kill ? workers.kills : 0,
                        accounts: accounts,
                        registrations: codes.count,
                        registrationConcurrency: options.enqueueConcurrency,
                        registrationsPerSecond: Double(codes.count) / registrationSeconds,
                        registrationMilliseconds: .init(registrations.map(\.1)),
                        answeredLater: answeredLater,
                        exchangesLost: lost,
                        deletionToCompletedMilliseconds: .init(deletionMilliseconds),
                        valid: problems.isEmpty,
                        problems: problems
                    )
                }
            }
        }
    }

    private func waitUntil(_ what: String, within limit: Duration, _ done: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while try await !done() {
            guard ContinuousClock.now < deadline else { throw BenchmarkFailure("\(what): not within \(limit)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// A thread-safe counter of finished calls.
final class Counter: Sendable {
    private let value = Mutex(0)
    /// Adds one and returns the new count.
    func increment() -> Int {
        value.withLock {
            $0 += 1
            return $0
        }
    }
}

/// One `revoker work` process at a time, which can be SIGKILLed and replaced mid-run.
final class WorkerRelay: Sendable {
    let binary: String
    let environment: [String: String]
    private let current = Mutex<(process: RevokerProcess?, kills: Int)>((nil, 0))

    init(binary: String, environment: [String: String]) {
        self.binary = binary
        self.environment = environment
    }

    var kills: Int { current.withLock { $0.kills } }

    func start() throws {
        let process = try RevokerProcess(["work", "--log-level", "error"], environment: environment, binary: binary)
        current.withLock { $0.process = process }
    }

    /// SIGKILLs the worker (whatever it holds dies with it) and starts another.
    func killAndReplace() async throws {
        let killed = current.withLock {
            $0.kills += 1
            return $0.process
        }
        killed?.signal(SIGKILL)
        _ = try? await killed?.wait(timeout: .seconds(10))
        try start()
    }

    /// Stops the worker (SIGTERM): it finishes or releases what it holds.
    func stop() async {
        let process = current.withLock { $0.process }
        process?.signal(SIGTERM)
        _ = try? await process?.wait(timeout: .seconds(30))
    }
}

/// The HTTP API of the run, with its key.
struct BenchAPI: Sendable {
    let port: Int
    let key: String
    let http: HTTPClient

    init(port: Int, key: String, width: Int) {
        self.port = port
        self.key = key
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: width)
        http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// Sends `body` as JSON; returns the status, the body and the milliseconds the call took.
    func send(_ method: HTTPMethod, _ path: String, _ body: [String: Any]) async throws -> (Int, Data, Double) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(data: try JSONSerialization.data(withJSONObject: body)))
        let started = ContinuousClock.now
        let response = try await http.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), Data(buffer: bytes), (ContinuousClock.now - started).timeInterval * 1000)
    }

    func shutdown() {
        http.shutdown { _ in }
    }
}
