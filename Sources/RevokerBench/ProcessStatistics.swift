import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// CPU time and peak memory of processes, from `/proc` (Linux).
enum ProcessStatistics {
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// User + system CPU seconds of a live process, or nil when it is gone.
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return cpuSeconds(statLine: stat)
    }

    /// The peak resident set (VmHWM) of a live process in bytes, or nil when it is gone.
    static func peakResidentBytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first
        return kilobytes.map { $0 * 1024 }
    }

    /// CPU seconds of a PostgreSQL server: the postmaster `postmaster` and its children (backends,
    /// background processes), summed. Other servers on the machine are left out.
    ///
    /// Backends that ended meanwhile drop out of the sum: measure with connections that stay open.
    /// The descriptors a process holds open (sockets, files, pipes).
    static func openFiles(pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    static func postgresCPUSeconds(postmaster: Int32) -> Double {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return 0 }
        var total = 0.0
        for entry in entries where entry.first?.isNumber == true {
            guard let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            // Field 4 of stat is the parent's pid (index 1 after the command name).
            guard Int32(entry) == postmaster || (fields.count > 1 && Int32(fields[1]) == postmaster) else { continue }
            total += cpuSeconds(statLine: stat) ?? 0
        }
        return total
    }

    /// The parent of a process (for a backend: the postmaster).
    static func parent(of pid: Int32) -> Int32? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let end = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    /// CPU seconds this process has used (the benchmark and its in-process sandbox).
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    private static func cpuSeconds(statLine: String) -> Double? {
        // The command name may contain spaces: fields are counted after its closing parenthesis.
        guard let end = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }
}

/// Runs `body(0..<count)` with at most `width` calls in flight; results in index order.
func concurrently<T: Sendable>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        var results = [T?](repeating: nil, count: count)
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { (index, try await body(index)) }
            next += 1
        }
        while let (index, value) = try await group.next() {
            results[index] = value
            if next < count {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}

extension BenchmarkReport.Percentiles {
    /// Nearest-rank percentiles of `values` (milliseconds).
    init(_ values: [Double]) {
        let sorted = values.sorted()
        func rank(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[Swift.min(Swift.max(index, 0), sorted.count - 1)]
        }
        self.init(p50: rank(0.50), p95: rank(0.95), p99: rank(0.99), max: sorted.last ?? 0, samples: sorted.count)
    }
}
