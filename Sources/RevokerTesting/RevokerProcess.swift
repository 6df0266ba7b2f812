import Foundation

/// The `revoker` binary run as a real process, for tests of the command line, signals and crashes.
public final class RevokerProcess: @unchecked Sendable {
    /// The built binary: `$REVOKER_BINARY`, else `revoker` beside the test bundle.
    public static var binary: String {
        if let path = ProcessInfo.processInfo.environment["REVOKER_BINARY"], !path.isEmpty { return path }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("revoker").path
    }

    private let process = Process()
    private let output: URL
    private let errors: URL

    /// Starts `revoker arguments…` with exactly `environment` (plus PATH), and `stdin` piped in when given.
    public init(_ arguments: [String], environment: [String: String], stdin: Data? = nil) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        output = directory.appendingPathComponent("stdout")
        errors = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"]
        process.environment = env
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try input.fileHandleForWriting.close()
    }

    /// Runs to completion and returns the exit status with what it printed.
    public static func run(_ arguments: [String], environment: [String: String], stdin: Data? = nil, timeout: Duration = .seconds(120)) async throws -> Result {
        let process = try RevokerProcess(arguments, environment: environment, stdin: stdin)
        return try await process.wait(timeout: timeout)
    }

    /// The outcome of a finished process.
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// Whether a signal ended it.
        public var signalled: Bool
    }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// What it has written to standard output so far.
    public var stdoutSoFar: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
    /// What it has written to standard error so far.
    public var stderrSoFar: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    /// Sends a signal (SIGTERM, SIGINT, SIGKILL).
    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to end; kills it and throws when `timeout` passes first.
    public func wait(timeout: Duration = .seconds(120)) async throws -> Result {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                signal(SIGKILL)
                throw TimedOutWaiting(output: stdoutSoFar, errors: stderrSoFar)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Result(
            status: process.terminationStatus, stdout: stdoutSoFar, stderr: stderrSoFar,
            signalled: process.terminationReason == .uncaughtSignal
        )
    }

    /// Waits until standard output or error contains `text`.
    public func waitForOutput(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(stdoutSoFar.contains(text) || stderrSoFar.contains(text)) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw TimedOutWaiting(output: stdoutSoFar, errors: stderrSoFar)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    public struct TimedOutWaiting: Error, CustomStringConvertible {
        public var output: String
        public var errors: String
        public var description: String { "the process did not finish in time; stdout: \(output.suffix(2000)) stderr: \(errors.suffix(2000))" }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
