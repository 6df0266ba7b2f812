import Foundation

/// The project's documentation as the tests read it: what the docs print must still work.
public enum Documentation {
    /// The text of the document at `path` (relative to the package root, as `docs/operations.md`).
    public static func read(_ path: String) throws -> String {
        try String(contentsOf: PrivatePostgres.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// Every `docs/*.md`, as paths relative to the package root, sorted.
    public static func docs() throws -> [String] {
        let directory = PrivatePostgres.packageRoot.appendingPathComponent("docs")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    /// The bodies of the fenced ```` ```sh ```` blocks in `text`, in order, without their fences.
    public static func shellBlocks(in text: String) -> [String] {
        text.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
    }
}
