import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Failed sign-ins to the compliance pages, counted per client address: an address that fails
/// ``Limits/failures`` times within ``Limits/window`` is refused (429) for ``Limits/lockout``,
/// whatever it sends, while other addresses sign in as before.
///
/// API keys are long random secrets, so this does not stop a guess so much as make a guessing
/// client visible and slow. Memory is bounded: at most ``Limits/maximumAddresses`` addresses are
/// tracked; beyond that, expired entries go first, then the oldest that is not refused.
actor SignInThrottle {
    struct Limits: Sendable {
        var failures = 10
        var window: Duration = .seconds(15 * 60)
        var lockout: Duration = .seconds(15 * 60)
        var maximumAddresses = 10_000
    }

    private struct Entry {
        var failures: Int
        var windowEnds: ContinuousClock.Instant
        var refusedUntil: ContinuousClock.Instant?

        func isRefused(at now: ContinuousClock.Instant) -> Bool { refusedUntil.map { now < $0 } ?? false }
        func isExpired(at now: ContinuousClock.Instant) -> Bool { now >= windowEnds && !isRefused(at: now) }
    }

    let limits: Limits
    private var entries: [String: Entry] = [:]

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// How many addresses are tracked.
    var trackedAddresses: Int { entries.count }

    /// How long `address` is still refused; nil when it may try.
    func refusal(for address: String, now: ContinuousClock.Instant = .now) -> Duration? {
        guard let until = entries[address]?.refusedUntil, now < until else { return nil }
        return until - now
    }

    /// Counts a failed sign-in; returns the refusal's length when this failure starts one.
    @discardableResult
    func failed(_ address: String, now: ContinuousClock.Instant = .now) -> Duration? {
        var entry =
            entries[address].flatMap { $0.isExpired(at: now) ? nil : $0 }
            ?? Entry(failures: 0, windowEnds: now + limits.window, refusedUntil: nil)
        entry.failures += 1
        var started: Duration?
        if entry.failures >= limits.failures, !entry.isRefused(at: now) {
            entry.refusedUntil = now + limits.lockout
            // Kept until the refusal ends, then forgotten with the window.
            entry.windowEnds = max(entry.windowEnds, now + limits.lockout)
            started = limits.lockout
        }
        if entries[address] == nil { makeRoom(now: now) }
        entries[address] = entry
        return started
    }

    /// A sign-in succeeded: the address's failures are forgotten.
    func succeeded(_ address: String) {
        entries[address] = nil
    }

    /// Frees one entry when the table is full.
    private func makeRoom(now: ContinuousClock.Instant) {
        guard entries.count >= limits.maximumAddresses else { return }
        entries = entries.filter { !$0.value.isExpired(at: now) }
        guard entries.count >= limits.maximumAddresses else { return }
        // The oldest window goes, an address still refused only when every one is.
        let candidates = entries.filter { !$0.value.isRefused(at: now) }
        let pool = candidates.isEmpty ? entries : candidates
        if let oldest = pool.min(by: { $0.value.windowEnds < $1.value.windowEnds }) { entries[oldest.key] = nil }
    }

    /// The address a client is counted under: an IPv4 address (IPv4-mapped IPv6 included) as
    /// is, an IPv6 address by its /64 (one client commonly holds a whole /64).
    static func client(_ address: SocketAddress?) -> String {
        switch address {
        case .v4:
            return address?.ipAddress ?? "unknown"
        case .v6(let v6):
            // `sin6_addr` lies 8 bytes in on Linux and on Darwin (after family, port, flow info).
            let bytes = withUnsafeBytes(of: v6.address) { Array($0.dropFirst(8).prefix(16)) }
            guard bytes.count == 16 else { return address?.ipAddress ?? "unknown" }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes[12...].map(String.init).joined(separator: ".")
            }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        case .unixDomainSocket, nil:
            return "local"
        }
    }
}
