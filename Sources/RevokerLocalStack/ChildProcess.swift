import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, its output written by the child itself to files.
///
/// Not Foundation's `Process`: at high concurrency it closes descriptors it no longer owns
/// (swiftlang/swift#57827), which here closed descriptors of the test process's event loops
/// and database connections: test runs hung with every thread idle, or crashed on a null pointer.
/// This opens nothing in the parent but an input pipe, closes only what it opened, and reaps
/// only its own child.
public final class ChildProcess: Sendable {
    /// Standard input.
    enum Input {
        /// `/dev/null`.
        case none
        /// A file, read by the child.
        case file(String)
        /// A pipe this process writes to (``writeInput(_:)``) and closes (``closeInput()``).
        case pipe
    }

    public struct Exit: Sendable, Equatable {
        /// The exit code, or the number of the signal that ended it.
        public var status: Int32
        public var signalled: Bool
    }

    let pid: pid_t
    private let state: Mutex<(exit: Exit?, input: Int32)>

    /// Starts `executable` with `arguments` and exactly `environment`; its standard output and
    /// error go to the files `stdout` and `stderr` (created or truncated). The child starts with
    /// no signal blocked and default handlers, whatever this process has.
    init(
        executable: String,
        arguments: [String],
        environment: [String: String],
        input: Input = .none,
        stdout: String,
        stderr: String,
        workingDirectory: String? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipeEnds: [Int32] = [-1, -1]
        switch input {
        case .none:
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .pipe:
            guard GNU.pipe2(&pipeEnds, O_CLOEXEC) == 0 else { throw Self.failure("pipe2") }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let workingDirectory {
            guard let addchdir = GNU.addchdir else { throw Self.failure("posix_spawn_file_actions_addchdir_np", code: ENOSYS) }
            _ = addchdir(&actions, workingDirectory)
        }
        // Nothing else of this process leaks into the child.
        _ = GNU.addclosefrom?(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
        guard result == 0 else {
            if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
            throw Self.failure("posix_spawn \(executable)", code: result)
        }
        self.pid = pid
        state = Mutex((nil, pipeEnds[1]))
    }

    /// Writes `data` to the input pipe; false once the child stopped reading (EPIPE).
    @discardableResult
    func writeInput(_ data: Data) -> Bool {
        let fd = state.withLock { $0.input }
        guard fd >= 0 else { return false }
        return data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                // MSG_NOSIGNAL is for sockets; a pipe needs SIGPIPE ignored, which the writer does.
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    /// Closes the input pipe: a child reading to the end sees it.
    func closeInput() {
        let fd = state.withLock { state in
            defer { state.input = -1 }
            return state.input
        }
        if fd >= 0 { close(fd) }
    }

    /// How it ended, or nil while it runs (it is reaped here, once).
    var exit: Exit? {
        state.withLock { state in
            if let exit = state.exit { return exit }
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            guard reaped == pid else { return nil }
            let signal = status & 0x7f
            let exit = signal == 0 ? Exit(status: (status >> 8) & 0xff, signalled: false) : Exit(status: signal, signalled: true)
            state.exit = exit
            return exit
        }
    }

    var isRunning: Bool { exit == nil }

    /// Sends `signal` unless it has been reaped (its pid may then belong to another process).
    func signal(_ signal: Int32) {
        state.withLock { state in
            if state.exit == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits until it ends, polling; kills it once `timeout` has passed.
    func wait(timeout: Duration) async throws -> Exit {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let exit { return exit }
            if ContinuousClock.now > deadline { signal(SIGKILL) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Runs `executable` to its end, blocking this thread (for short tools such as `pg_ctl`),
    /// and returns its exit and standard output.
    public static func runBlocking(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String? = nil
    ) throws -> (status: Int32, output: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("stdout").path
        let child = try ChildProcess(
            executable: executable,
            arguments: arguments,
            environment: environment,
            stdout: output,
            stderr: directory.appendingPathComponent("stderr").path,
            workingDirectory: workingDirectory
        )
        while child.isRunning { usleep(10_000) }
        let exit = child.exit ?? Exit(status: -1, signalled: true)
        return (exit.signalled ? -exit.status : exit.status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    deinit {
        let (exit, fd) = state.withLock { ($0.exit, $0.input) }
        if fd >= 0 { close(fd) }
        // Still running: end it and reap it, so that no zombie outlives its owner.
        if exit == nil, self.exit == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    static func failure(_ what: String, code: Int32 = errno) -> any Error {
        POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO, userInfo: [NSLocalizedDescriptionKey: "\(what) failed"])
    }
}

/// glibc's extensions, which the Glibc module does not import (they need _GNU_SOURCE): looked up
/// once at run time.
private enum GNU {
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    typealias AddClosefrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(address, to: type)
    }

    static let addchdir = symbol("posix_spawn_file_actions_addchdir_np", as: AddChdir.self)
    static let addclosefrom = symbol("posix_spawn_file_actions_addclosefrom_np", as: AddClosefrom.self)
    private static let pipe2Function = symbol("pipe2", as: Pipe2.self)

    /// pipe2, or pipe and FD_CLOEXEC where it is missing.
    static func pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32 {
        if let pipe2Function { return pipe2Function(fds, flags) }
        guard Glibc.pipe(fds) == 0 else { return -1 }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return 0
    }
}
