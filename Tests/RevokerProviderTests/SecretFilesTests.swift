import Foundation
import RevokerProvider
import Testing

/// The permission check on files holding secrets, on real files.
@Suite("secret files")
struct SecretFilesTests {
    @Test("a file others may read warns, through a symlink too; the owner's alone does not")
    func modes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secret-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func file(_ name: String, mode: Int) throws -> String {
            let path = directory.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8), attributes: [.posixPermissions: mode]))
            return path
        }
        func link(_ name: String, to target: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
            return path
        }
        let open = try file("open", mode: 0o644)
        let closed = try file("closed", mode: 0o600)
        let ownGroup = try file("own-group", mode: 0o640)
        let foreignGroup = try file("foreign-group", mode: 0o640)
        // A group this process is not in (tests run as the file's owner, who may give it away only as root).
        let foreign = (try? FileManager.default.setAttributes([.groupOwnerAccountID: 54_321], ofItemAtPath: foreignGroup)) != nil
        let cases: [(String, Bool)] = [
            (open, true), (closed, false), (try link("to-open", to: open), true), (try link("to-closed", to: closed), false),
            (ownGroup, false), (directory.appendingPathComponent("missing").path, false),
        ]
        for (path, warns) in cases + (foreign ? [(foreignGroup, true)] : []) {
            var files = SecretFiles()
            files.check(path, holding: "a secret")
            #expect(files.warnings.isEmpty != warns, "\(path): \(files.warnings)")
            if warns { #expect(files.warnings.first?.contains("chmod 600 '\(path)'") == true) }
        }
    }
}
