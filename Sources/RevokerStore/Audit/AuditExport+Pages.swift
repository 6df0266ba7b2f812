import Foundation

extension AuditExport {
    /// Reads up to `limit` records matching `query`, page by page along the keyset cursor, and
    /// hands them to `write` as text in `format`: CSV and JSON page by page, the table once at
    /// the end (it needs every row for its widths). Returns how many records were written and
    /// whether more match.
    public static func write(
        from log: AuditLog,
        query: AuditQuery,
        limit: Int,
        format: AuditExportFormat,
        to write: (String) -> Void
    ) async throws -> (written: Int, more: Bool) {
        var query = query
        var printed = 0
        var table: [AuditRecord] = []
        switch format {
        case .csv: write(csvHeader())
        case .json: write("[")
        case .table: break
        }
        var more = false
        while true {
            query.limit = min(1000, limit - printed)
            let page = try await log.query(query)
            switch format {
            case .csv:
                write(page.records.map(csvRow).joined())
            case .json:
                let objects = page.records.map(jsonObject)
                if !objects.isEmpty {
                    write((printed == 0 ? "\n" : ",\n") + objects.joined(separator: ",\n"))
                }
            case .table:
                table += page.records
            }
            printed += page.records.count
            guard let cursor = page.nextCursor else { break }
            if printed >= limit {
                more = true
                break
            }
            query.cursor = cursor
        }
        switch format {
        case .csv: break
        case .json: write(printed == 0 ? "]\n" : "\n]\n")
        case .table:
            write(table.isEmpty ? "No audit events match.\n" : self.table(table))
        }
        return (printed, more)
    }
}
