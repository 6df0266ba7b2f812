import Foundation
import RevokerLocalStack

/// A PostgreSQL server of a test's own, started by `scripts/with-postgres`, that the test may
/// stop and start (a database restart must not disturb the other tests' shared server).
public final class PrivatePostgres: Sendable {
    /// `postgres://…` of the server's default database.
    public let url: String
    private let control: String
    private let holder: RevokerProcess.Handle

    /// The package's root directory, from this file's place in it.
    public static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Starts a server for the duration of `body`. One private server runs at a time: tests that
    /// stop and start servers while the whole suite loads the machine disturb each other less.
    public static func with<T>(_ body: (PrivatePostgres) async throws -> T) async throws -> T {
        await turn.acquire()
        let server: PrivatePostgres
        do {
            server = try await PrivatePostgres()
        } catch {
            await turn.release()
            throw error
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(server))
        } catch {
            result = .failure(error)
        }
        server.holder.terminate()
        await turn.release()
        return try result.get()
    }

    private static let turn = Turn()

    /// A first-come, first-served lock across tasks.
    private actor Turn {
        private var busy = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func acquire() async {
            guard busy else {
                busy = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty {
                busy = false
            } else {
                waiting.removeFirst().resume()
            }
        }
    }

    private init() async throws {
        let script = Self.packageRoot.appendingPathComponent("scripts/with-postgres").path
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = nil
        holder = try RevokerProcess.Handle(
            executable: script,
            arguments: ["sh", "-c", "echo \"READY $DATABASE_URL $WITH_POSTGRES_CTL\"; exec cat >/dev/null"],
            environment: environment,
            holdInput: true
        )
        let holder = self.holder
        let line: Substring = try await eventuallyValue("with-postgres starts a server: \(holder.errors.suffix(2000))") {
            guard let line = holder.output.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) else {
                guard holder.isRunning else { throw Failure(message: "with-postgres did not start a server: \(holder.errors.suffix(2000))") }
                return nil
            }
            return line
        }
        let parts = line.split(separator: " ")
        guard parts.count == 3 else { throw Failure(message: "unexpected output from with-postgres: \(line)") }
        url = String(parts[1])
        control = String(parts[2])
    }

    /// The end of the server's log, for a failure message (statements' parameters are not logged).
    public var logTail: String {
        let log = URL(fileURLWithPath: control).deletingLastPathComponent().appendingPathComponent("postgres.log")
        return String(((try? String(contentsOf: log, encoding: .utf8)) ?? "no log").suffix(3000))
    }

    /// Stops the server (fast shutdown: connections are cut).
    public func stop() throws { try run("stop", "-m", "fast") }

    /// Starts the stopped server again on the same port.
    public func start() throws { try run("start") }

    private func run(_ arguments: String...) throws {
        let (status, _) = try ChildProcess.runBlocking(control, arguments)
        guard status == 0 else { throw Failure(message: "pg_ctl \(arguments.joined(separator: " ")) failed") }
    }

    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
