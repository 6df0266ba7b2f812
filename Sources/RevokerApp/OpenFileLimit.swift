import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open files. A worker holds a socket per provider connection (a
/// handful over HTTP/2, one per call in flight over HTTP/1.1), per database connection and per
/// API connection; a soft limit of 1,024 is the common default and too low for the latter.
enum OpenFileLimit {
    /// Raises the soft limit to the hard one, as Go's runtime and the JVM do, and warns when
    /// even that is below `need`; returns the limit in force.
    @discardableResult
    static func raise(need: Int, logger: Logger) -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let current = Int(clamping: limit.rlim_cur)
        if current < need {
            logger.warning(
                "The open-file limit is below what this configuration may need; raise LimitNOFILE (systemd) or the container runtime's nofile limit",
                metadata: ["limit": "\(current)", "need": "\(need)"]
            )
        }
        return current
    }

    /// Sockets a process may hold at once: providers over HTTP/1.1 at worst (one per call in
    /// flight), the database pool, the API's connections, and room for files and webhooks.
    static func need(workerConcurrency: Int?, apiConnections: Int?) -> Int {
        256 + (workerConcurrency ?? 0) + (apiConnections ?? 0)
    }
}
