import Foundation

/// The formats audit records are exported in (the CLI's `audit --format`, and the HTTP API).
public enum AuditExportFormat: String, Sendable, Hashable, CaseIterable {
    /// Columns aligned for a terminal; long text shortened, control characters replaced.
    case table
    /// A JSON array of objects with snake_case keys; every key present, `null` when empty.
    case json
    /// RFC 4180 CSV with a header row, CRLF line ends, formula injection neutralised.
    case csv
}
