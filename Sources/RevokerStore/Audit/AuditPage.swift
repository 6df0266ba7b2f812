import Foundation
import Logging
import PostgresNIO

/// One page of audit records, ordered by (occurred_at, id).
public struct AuditPage: Sendable, Hashable {
    /// The records of this page.
    public var records: [AuditRecord]
    /// Opaque cursor for the next page; nil when this page is the last.
    public var nextCursor: String?
}
