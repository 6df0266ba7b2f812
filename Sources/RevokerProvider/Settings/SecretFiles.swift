import Foundation

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
        // The target's mode, not the link's: a Kubernetes secret is a symlink.
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: target),
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue,
            let group = (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value
        else { return }  // a file that cannot be read fails where it is read
        let permissions = mode & 0o777
        let groupReadIsOurs = permissions & 0o070 == 0o040 && Self.processGroups.contains(gid_t(group))
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
