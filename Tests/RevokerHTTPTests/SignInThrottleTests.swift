import NIOCore
import Testing

@testable import RevokerHTTP

/// The sign-in throttle's bookkeeping, on a clock the test moves (no waiting).
@Suite("Failed UI sign-ins, counted per address")
struct SignInThrottleTests {
    static let limits = SignInThrottle.Limits(failures: 3, window: .seconds(60), lockout: .seconds(120), maximumAddresses: 50)

    @Test func anAddressIsRefusedAfterItsFailuresForTheLockoutAndASuccessForgetsThem() async {
        let throttle = SignInThrottle(limits: Self.limits)
        let start = ContinuousClock.now
        #expect(await throttle.failed("a", now: start) == nil)
        #expect(await throttle.failed("a", now: start) == nil)
        #expect(await throttle.failed("a", now: start) == .seconds(120))
        #expect(await throttle.refusal(for: "a", now: start) == .seconds(120))
        #expect(await throttle.refusal(for: "a", now: start + .seconds(119)) == .seconds(1))
        #expect(await throttle.refusal(for: "b", now: start) == nil, "another address is not refused")
        #expect(await throttle.refusal(for: "a", now: start + .seconds(120)) == nil, "the lockout ends")

        // Failures spread over more than the window do not add up.
        #expect(await throttle.failed("c", now: start) == nil)
        #expect(await throttle.failed("c", now: start + .seconds(30)) == nil)
        #expect(await throttle.failed("c", now: start + .seconds(61)) == nil)
        #expect(await throttle.refusal(for: "c", now: start + .seconds(61)) == nil)

        // A success forgets the failures before it.
        await throttle.failed("d", now: start)
        await throttle.failed("d", now: start)
        await throttle.succeeded("d")
        #expect(await throttle.failed("d", now: start) == nil)
        #expect(await throttle.refusal(for: "d", now: start) == nil)
    }

    @Test func atMostTheLimitOfAddressesIsTrackedAndARefusedOneIsKept() async {
        let throttle = SignInThrottle(limits: Self.limits)
        let start = ContinuousClock.now
        for _ in 0..<3 { await throttle.failed("guesser", now: start) }
        for index in 0..<1000 {
            await throttle.failed("10.0.\(index / 256).\(index % 256)", now: start + .milliseconds(index))
        }
        #expect(await throttle.trackedAddresses <= 50)
        #expect(await throttle.refusal(for: "guesser", now: start + .seconds(1)) != nil, "a refused address is not pushed out by others")
    }

    @Test func clientsAreCountedByTheirAddressAndIPv6ByIts64() throws {
        let v4 = try SocketAddress(ipAddress: "192.0.2.7", port: 5000)
        #expect(SignInThrottle.client(v4) == "192.0.2.7")
        #expect(SignInThrottle.client(try SocketAddress(ipAddress: "192.0.2.7", port: 6000)) == "192.0.2.7")
        let mapped = try SocketAddress(ipAddress: "::ffff:192.0.2.7", port: 5000)
        #expect(SignInThrottle.client(mapped) == "192.0.2.7")
        let one = try SocketAddress(ipAddress: "2001:db8:1:2:3:4:5:6", port: 1)
        let sameSubnet = try SocketAddress(ipAddress: "2001:db8:1:2:ffff::1", port: 2)
        let otherSubnet = try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 2)
        #expect(SignInThrottle.client(one) == SignInThrottle.client(sameSubnet))
        #expect(SignInThrottle.client(one) != SignInThrottle.client(otherSubnet))
        #expect(SignInThrottle.client(nil) == "local")
    }
}
