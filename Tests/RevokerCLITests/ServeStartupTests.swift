import Foundation
import RevokerLocalStack
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("revoker serve: what keeps it from starting")
struct ServeStartupTests {
    /// A second replica given a port another process holds: one line naming the address, exit 2,
    /// and no crash (it once ended in a fatal error and a backtrace, its database client never
    /// answering the cancellation).
    @Test func aPortAlreadyInUseEndsServeWithOneLineAndExitTwo() async throws {
        try await RevokerTestStack.with { stack in
            var environment = stack.environment
            environment["REVOKER_HTTP_PORT"] = "0"
            let first = try RevokerProcess(["serve", "--log-level", "info"], environment: environment)
            defer { first.signal(SIGKILL) }
            try await first.waitForOutput("Serving the API")
            let port = try #require(
                first.stderrSoFar.split(separator: " ").first { $0.hasPrefix("http.port=") }.flatMap { Int($0.dropFirst(10).prefix { $0.isNumber }) }
            )
            environment["REVOKER_HTTP_PORT"] = String(port)
            let second = try await RevokerProcess.run(["serve"], environment: environment, timeout: .seconds(120))
            #expect(!second.signalled, "\(second.stderr.suffix(2000))")
            #expect(second.status == 2, "\(second.stderr.suffix(2000))")
            #expect(second.stderr.contains("127.0.0.1:\(port)") && second.stderr.contains("in use"), "\(second.stderr.suffix(2000))")
            #expect(!second.stderr.contains("Fatal error"))
            // The first replica serves on.
            #expect(first.isRunning)
        }
    }
}
