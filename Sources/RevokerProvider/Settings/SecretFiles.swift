import Foundation

#if canImport(Glibc)
import Glibc
#endif
#if canImport(CoreFoundation)
import CoreFoundation  // `stat`'s members, with MemberImportVisibility
#endif

/// Checks the files that hold secrets, as ssh checks its keys: one that others may read, or
/// the group may write, is a warning, or with `--strict` an error. Group read is accepted only
/// when the group is one of this process's own (Kubernetes' `fsGroup` with mode 0440, Debian's
/// `ssl-cert` convention); any other group's read is a warning too.
public struct SecretFiles: Sendable {
    /// What is unsafe but usable, one sentence each.
    public private(set) var warnings: [String] = []

    public init() {}

    /// Notes a warning when the file at `path`, holding `what`, is open to others.
    public mutating func check(_ path: String, holding what: String) {
        // stat, not lstat: a Kubernetes secret is a symlink, and its target's mode is what counts.
        var status = stat()
        guard stat(path, &status) == 0 else { return }  // a file that cannot be read fails where it is read
        let permissions = Int(status.st_mode) & 0o777
        let groupReadIsOurs = permissions & 0o070 == 0o040 && Self.processGroups.contains(status.st_gid)
        guard permissions & 0o007 != 0 || (permissions & 0o070 != 0 && !groupReadIsOurs) else { return }
        let message =
            "The file '\(path)' holds \(what) and other users may access it (mode \(String(permissions, radix: 8))); restrict it with `chmod 600 '\(path)'`."
        if !warnings.contains(message) { warnings.append(message) }
    }

    private static var processGroups: Set<gid_t> {
        var groups = [gid_t](repeating: 0, count: Int(getgroups(0, nil)))
        let count = getgroups(Int32(groups.count), &groups)
        return Set(groups.prefix(Int(max(count, 0)))).union([getegid()])
    }
}
