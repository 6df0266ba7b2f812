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

    /// A stretch of a Markdown document: prose, or a fenced code block.
    public enum Segment: Equatable, Sendable {
        case prose(String)
        /// The block's language (`sh`, `sql`, or empty) and its body, without its fences and
        /// without the indentation of a block inside a list item.
        case code(language: String, body: String)
    }

    /// `text` as prose and fenced code blocks, in order: line by line, so that a block indented
    /// inside a list item (its fences indented too) is read whole, and nothing inside a block is
    /// taken for a fence of another.
    public static func segments(in text: String) -> [Segment] {
        var segments: [Segment] = []
        var prose: [Substring] = []
        var open: (indent: Int, language: String, lines: [String])?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            let indent = line.count - trimmed.count
            if let block = open {
                if trimmed.hasPrefix("```"), trimmed.allSatisfy({ $0 == "`" || $0 == " " }) {
                    segments.append(.code(language: block.language, body: block.lines.joined(separator: "\n")))
                    open = nil
                } else {
                    open?.lines.append(String(line.dropFirst(min(block.indent, indent))))
                }
            } else if trimmed.hasPrefix("```") {
                if !prose.isEmpty { segments.append(.prose(prose.joined(separator: "\n"))) }
                prose = []
                open = (indent, String(trimmed.dropFirst(3)).trimmingCharacters(in: .whitespaces), [])
            } else {
                prose.append(line)
            }
        }
        if !prose.isEmpty { segments.append(.prose(prose.joined(separator: "\n"))) }
        return segments
    }

    /// The bodies of the fenced ```` ```sh ```` blocks in `text`, in order, without their fences.
    public static func shellBlocks(in text: String) -> [String] {
        segments(in: text).compactMap { segment in
            guard case .code("sh", let body) = segment else { return nil }
            return body
        }
    }
}
