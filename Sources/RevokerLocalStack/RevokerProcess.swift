import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The `revoker` binary run as a real process, for tests of the command line, signals and crashes.
public final class RevokerProcess: @unchecked Sendable {
    /// The built binary: `$REVOKER_BINARY`, else `revoker` beside the test bundle.
    public static var binary: String {
        if let path = ProcessInfo.processInfo.environment["REVOKER_BINARY"], !path.isEmpty { return path }
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("revoker").path
    }

    private let handle: Handle

    /// Starts `revoker arguments…` (``binary`` unless another is given) with exactly `environment`
    /// (plus PATH), and `stdin` piped in when given.
    public init(_ arguments: [String], environment: [String: String], stdin: Data? = nil, binary: String = RevokerProcess.binary) throws {
        var env = environment
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"]
        handle = try Handle(executable: binary, arguments: arguments, environment: env, stdin: stdin)
    }

    /// Runs to completion and returns the exit status with what it printed.
    public static func run(
        _ arguments: [String],
        environment: [String: String],
        stdin: Data? = nil,
        timeout: Duration = .seconds(120)
    ) async throws -> Result {
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

    public var processIdentifier: Int32 { handle.processIdentifier }
    public var isRunning: Bool { handle.isRunning }

    /// What it has written to standard output so far.
    public var stdoutSoFar: String { handle.output }
    /// What it has written to standard error so far.
    public var stderrSoFar: String { handle.errors }

    /// Sends a signal (SIGTERM, SIGINT, SIGKILL).
    public func signal(_ signal: Int32) {
        handle.signal(signal)
    }

    /// Waits for the process to end; kills it and throws when `timeout` passes first.
    public func wait(timeout: Duration = .seconds(120)) async throws -> Result {
        let deadline = ContinuousClock.now + timeout
        while handle.isRunning {
            if ContinuousClock.now > deadline {
                signal(SIGKILL)
                throw TimedOutWaiting(output: stdoutSoFar, errors: stderrSoFar)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return Result(status: handle.terminationStatus, stdout: stdoutSoFar, stderr: stderrSoFar, signalled: handle.signalled)
    }

    /// Waits until standard output or error contains `text`.
    public func waitForOutput(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(stdoutSoFar.contains(text) || stderrSoFar.contains(text)) {
            guard handle.isRunning, ContinuousClock.now < deadline else {
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
}

extension RevokerProcess {
    /// Any program run as a child process, with its output captured to files.
    public final class Handle: Sendable {
        private let child: ChildProcess
        private let outputFile: URL
        private let errorFile: URL

        /// Starts `executable` in `workingDirectory` (default: this process's). Standard input is
        /// `stdin` when given (written from another thread, then closed), the file `stdinFile`, or
        /// nothing; with `holdInput`, it stays open until ``terminate()``: a child that reads it
        /// to the end (`cat`, `read`) then ends without a signal.
        public init(
            executable: String,
            arguments: [String],
            environment: [String: String],
            stdin: Data? = nil,
            stdinFile: String? = nil,
            holdInput: Bool = false,
            workingDirectory: URL? = nil
        ) throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-process-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            outputFile = directory.appendingPathComponent("stdout")
            errorFile = directory.appendingPathComponent("stderr")
            let input: ChildProcess.Input = stdinFile.map { .file($0) } ?? (stdin != nil || holdInput ? .pipe : .none)
            child = try ChildProcess(
                executable: executable,
                arguments: arguments,
                environment: environment,
                input: input,
                stdout: outputFile.path,
                stderr: errorFile.path,
                workingDirectory: workingDirectory?.path
            )
            if let stdin {
                // The child may stop reading at its own limit: a broken pipe must not end the test run.
                _ = Glibc.signal(SIGPIPE, SIG_IGN)
                let child = self.child
                DispatchQueue.global().async {
                    child.writeInput(stdin)
                    child.closeInput()
                }
            }
        }

        public var processIdentifier: Int32 { child.pid }
        public var isRunning: Bool { child.isRunning }
        public var output: String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }
        public var errors: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }
        public var terminationStatus: Int32 { child.exit?.status ?? 0 }
        public var signalled: Bool { child.exit?.signalled ?? false }

        public func signal(_ signal: Int32) { child.signal(signal) }

        /// Closes the process's standard input and waits up to `grace` for it to end, then kills it
        /// (no SIGTERM: a shell defers its traps until its foreground child ends).
        public func terminate(grace: Duration = .seconds(30)) {
            child.closeInput()
            let deadline = ContinuousClock.now + grace
            while child.isRunning, ContinuousClock.now < deadline { usleep(20_000) }
            if child.isRunning { signal(SIGKILL) }
        }
    }
}
