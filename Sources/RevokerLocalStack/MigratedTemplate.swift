import Crypto
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import RevokerEvidence
import RevokerStore
import Synchronization

/// A database with every migration applied, made once per process on `DATABASE_URL`'s server,
/// that each migrated scratch database is copied from (`CREATE DATABASE … TEMPLATE`): migrating
/// a database per test, ~150 at once, swamped the machine the tests run on.
///
/// Its name is the process's own (two test runs may share a server) and carries when it was
/// made and the migrations' checksum. Nobody may connect to it once it is migrated, so copies
/// may be made concurrently. It is dropped when the process exits; one left by a process that
/// died is dropped by the next process to make one, once it is a day old.
actor MigratedTemplate {
    static let shared = MigratedTemplate()

    private var making: (server: String, task: Task<String, any Error>)?

    /// The template's name on `server`, made and migrated on first use. A failed attempt is
    /// forgotten, so the next caller tries again.
    func name(on server: String, logger: Logger) async throws -> String {
        let task: Task<String, any Error>
        if let making, making.server == server {
            task = making.task
        } else {
            // One lazily made template shared by every test; not tied to any one caller's task, so
            // a cancelled test does not leave the others a half-made template.
            task = Task { try await Self.make(on: server, logger: logger) }
            making = (server, task)
        }
        do {
            return try await task.value
        } catch {
            if making?.task == task { making = nil }
            throw error
        }
    }

    static let prefix = "revoker_template_"

    /// The migrations' combined checksum, short: a template says which schema it holds.
    static var migrationsChecksum: String {
        let all = Migration.all.map(\.checksum).joined(separator: ",")
        return SHA256.hash(data: Array(all.utf8)).prefix(6).hex
    }

    private static func make(on server: String, logger: Logger) async throws -> String {
        var adminConfiguration = try PostgresClient.Configuration(url: server)
        adminConfiguration.options.maximumConnections = 2
        let made = Int(Date().timeIntervalSince1970)
        let random = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
        let name = "\(prefix)\(made)_\(migrationsChecksum)_\(random)"
        var configuration = adminConfiguration
        configuration.database = name
        let admin = PostgresClient(configuration: adminConfiguration)
        return try await ScratchDatabase.withClientRunning(admin, name: "the admin client of \(name)") {
            await dropStale(admin, logger: logger)
            try await admin.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \"\(name)\""), logger: logger)
            DropAtExit.add(server: server, name: name)
            do {
                let client = PostgresClient(configuration: configuration)
                try await ScratchDatabase.withClientRunning(client, name: "the client of \(name)") {
                    try await reportingStall("migrating the template \(name)") {
                        _ = try await Migrator(client: client, logger: logger).migrate()
                    }
                }
                // The migrating client is closed: from now on nobody connects, and copies never
                // find it in use.
                try await admin.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(name)\" WITH ALLOW_CONNECTIONS false"), logger: logger)
            } catch {
                _ = try? await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \"\(name)\" WITH (FORCE)"), logger: logger)
                throw error
            }
            return name
        }
    }

    /// Drops templates that processes which died left behind, once they are a day old (no test
    /// run lasts that long; a younger one may be another run's, in use).
    private static func dropStale(_ admin: PostgresClient, logger: Logger) async {
        let pattern = prefix.replacingOccurrences(of: "_", with: "\\_") + "%"
        guard let rows = try? await admin.query("SELECT datname FROM pg_database WHERE datname LIKE \(pattern)", logger: logger).collect()
        else { return }
        let dayAgo = Int(Date().timeIntervalSince1970) - 86_400
        for row in rows {
            guard let name = try? row.decode(String.self),
                let made = Int(name.dropFirst(prefix.count).prefix { $0 != "_" }), made < dayAgo
            else { continue }
            _ = try? await admin.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \"\(name)\""), logger: logger)
        }
    }
}

/// The templates this process made, dropped when it exits. Swift Testing has no hook for the
/// end of a run, but the test process ends with `exit`, which runs `atexit` handlers.
enum DropAtExit {
    private static let made = Mutex<[(server: String, name: String)]>([])

    static func add(server: String, name: String) {
        let first = made.withLock {
            $0.append((server, name))
            return $0.count == 1
        }
        if first { atexit { DropAtExit.dropAll() } }
    }

    /// Blocks the exiting thread for at most 15 s: a server that does not answer leaves the
    /// template to the next process's sweep.
    private static func dropAll() {
        let templates = made.withLock { $0 }
        guard !templates.isEmpty else { return }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let eventLoop = group.next()
        let logger = Logger(label: "revoker.templates", factory: { _ in SwiftLogNoOpLogHandler() })
        for (server, name) in templates {
            guard let configuration = try? DatabaseEndpoint(url: server).connectionConfiguration() else { continue }
            let done = eventLoop.makePromise(of: Void.self)
            let limit = eventLoop.scheduleTask(in: .seconds(15)) { done.fail(ChannelError.connectTimeout(.seconds(15))) }
            PostgresConnection.connect(on: eventLoop, configuration: configuration, id: 1, logger: logger).flatMap { connection in
                connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \"\(name)\" WITH (FORCE)"), logger: logger)
                    .flatMap { _ in connection.close() }
            }.cascade(to: done)
            try? done.futureResult.wait()
            limit.cancel()
        }
    }
}
