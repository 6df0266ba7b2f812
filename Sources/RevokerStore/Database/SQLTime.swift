/// Times in SQL as Revoker's evidence encodes them.
enum SQLTime {
    /// A timestamptz expression in exact microseconds since 1970 (`extract(epoch)` alone is a
    /// double before PostgreSQL 14). Name a column or a value computed once: the expression
    /// reads it twice.
    static func micros(_ timestamp: String) -> String {
        "(floor(extract(epoch FROM \(timestamp)))::bigint * 1000000 + extract(microseconds FROM \(timestamp))::bigint % 1000000)"
    }
}
