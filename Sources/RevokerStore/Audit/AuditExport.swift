import Foundation
import RevokerEvidence

extension AuditRecord {
    /// The exported columns, in order: CSV header names and JSON keys.
    public static let exportColumns: [String] = [
        "id", "occurred_at", "request_id", "client_id", "external_reference", "apple_user_id", "event", "attempt", "actor",
        "apple_endpoint", "http_status", "apple_error", "apple_error_description", "latency_ms", "detail",
    ]

    /// The record's values as text, in ``exportColumns`` order; nil where the record has no value.
    public var exportValues: [String?] {
        [
            String(self.id), WireFormat.timestamp(self.occurredAt), self.requestID?.uuidString.lowercased(), self.clientID,
            self.externalReference, self.userID, self.event, self.attempt.map(String.init), self.actor, self.providerEndpoint,
            self.httpStatus.map(String.init), self.providerError, self.providerErrorDescription, self.latencyMilliseconds.map(String.init),
            self.detail,
        ]
    }
}

/// Renders audit records as CSV, JSON or an aligned table.
///
/// The functions come in whole-document and piecewise forms, so a caller can stream pages
/// (header, then rows or objects page by page) without holding the whole trail in memory.
public enum AuditExport {
    // MARK: Whole documents

    /// Renders `records` in `format`; the result ends with a line break.
    public static func render(_ records: [AuditRecord], as format: AuditExportFormat) -> String {
        switch format {
        case .table: table(records)
        case .json: json(records)
        case .csv: csv(records)
        }
    }

    /// RFC 4180 CSV: the header row, then one row per record, CRLF line ends.
    public static func csv(_ records: [AuditRecord]) -> String {
        var text = csvHeader()
        for record in records { text += csvRow(record) }
        return text
    }

    /// A JSON array of objects, one per line (valid JSON, and easy to diff or grep).
    public static func json(_ records: [AuditRecord]) -> String {
        guard !records.isEmpty else { return "[]\n" }
        return "[\n" + records.map(jsonObject).joined(separator: ",\n") + "\n]\n"
    }

    /// Columns aligned for a terminal, with a header line. Long text is shortened with `…`
    /// and control characters are shown as `?`, so a stored value cannot drive the terminal.
    public static func table(_ records: [AuditRecord]) -> String {
        let headers = ["OCCURRED AT", "EVENT", "REQUEST", "CLIENT ID", "REFERENCE", "ATTEMPT", "ACTOR", "APPLE", "DETAIL"]
        let limits = [27, 20, 36, 40, 40, 7, 40, 60, 80]
        var rows: [[String]] = [headers]
        for record in records {
            let call = [record.providerEndpoint, record.httpStatus.map(String.init), record.providerError, record.providerErrorDescription]
                .compactMap { $0 }.joined(separator: " ")
            let values = [
                WireFormat.timestamp(record.occurredAt), record.event, record.requestID?.uuidString.lowercased() ?? "-", record.clientID ?? "-",
                record.externalReference ?? "-", record.attempt.map(String.init) ?? "-", record.actor, call.isEmpty ? "-" : call,
                record.detail ?? "-",
            ]
            rows.append(zip(values, limits).map { terminalSafe($0, limit: $1) })
        }
        var widths = Array(repeating: 0, count: headers.count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        var text = ""
        for row in rows {
            var line = ""
            for (index, cell) in row.enumerated() {
                line += index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count + 2)
            }
            text += line + "\n"
        }
        return text
    }

    // MARK: Pieces

    /// The CSV header row, with its CRLF.
    public static func csvHeader() -> String {
        AuditRecord.exportColumns.map(csvField).joined(separator: ",") + "\r\n"
    }

    /// One CSV row, with its CRLF. Missing values are empty fields.
    public static func csvRow(_ record: AuditRecord) -> String {
        record.exportValues.map { csvField($0 ?? "") }.joined(separator: ",") + "\r\n"
    }

    /// One CSV field per RFC 4180, safe to open in a spreadsheet (OWASP's CSV-injection advice).
    ///
    /// Control, invisible-formatting and separator characters (ESC, CR, LF, tab, bidirectional
    /// overrides, U+2028) are written as `\uXXXX`, so a stored value can neither break a row
    /// nor drive a terminal. A value whose first visible character would start a formula (`=`,
    /// `+`, `-`, `@`, or their full-width forms) gets a leading `'`. A value with a comma, a
    /// double quote or a space at either end is quoted, inner quotes doubled.
    public static func csvField(_ value: String) -> String {
        var field = ""
        for scalar in value.unicodeScalars {
            if visibleEscapes(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                field += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                field.unicodeScalars.append(scalar)
            }
        }
        let formulaStarts: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\u{FF1D}", "\u{FF0B}", "\u{FF0D}", "\u{FF20}"]
        if let first = field.unicodeScalars.first(where: { !$0.properties.isWhitespace }), formulaStarts.contains(first) {
            field = "'" + field
        }
        let needsQuotes = field.contains { $0 == "," || $0 == "\"" } || field.hasPrefix(" ") || field.hasSuffix(" ")
        guard needsQuotes else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Characters human-facing output shows escaped: controls, invisible formatting and line or
    /// paragraph separators.
    static func visibleEscapes(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// One record as a single-line JSON object with every key of ``AuditRecord/exportColumns``
    /// (numbers as numbers, missing values as `null`).
    public static func jsonObject(_ record: AuditRecord) -> String {
        let numeric: Set<String> = ["id", "attempt", "http_status", "latency_ms"]
        return WireFormat.jsonObject(
            zip(AuditRecord.exportColumns, record.exportValues).map { key, value in
                (key, value.map { numeric.contains(key) ? $0 : WireFormat.jsonString($0) } ?? "null")
            }
        )
    }

    // MARK: Helpers

    /// Replaces control characters (including escape sequences' ESC) with `?` and shortens to `limit` characters.
    public static func terminalSafe(_ value: String, limit: Int) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                value.unicodeScalars.map { scalar in
                    scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                        || scalar == "\u{2028}" || scalar == "\u{2029}" ? "?" : scalar
                }
            )
        )
        guard cleaned.count > limit else { return cleaned }
        return String(cleaned.prefix(max(0, limit - 1))) + "…"
    }
}
