import PostgresNIO

/// Values for SQL written piece by piece (the filters a caller gave, the rows of a batch): each
/// value bound returns its placeholder, so no `$N` is counted by hand.
struct SQLBindings {
    private(set) var binds = PostgresBindings()

    init() {}

    /// Continues after `binds`, the values of a query written elsewhere.
    init(after binds: PostgresBindings) {
        self.binds = binds
    }

    /// Binds `value` and returns its placeholder (`$1`, `$2`, …).
    mutating func bind(_ value: some PostgresNonThrowingEncodable) -> String {
        binds.append(value)
        return "$\(binds.count)"
    }

    /// Binds `value` (NULL when nil) and returns its placeholder.
    mutating func bind<Value: PostgresNonThrowingEncodable>(_ value: Value?) -> String {
        binds.append(value)
        return "$\(binds.count)"
    }

    /// Binds `value` and returns its placeholder.
    mutating func bind(_ value: some PostgresEncodable) throws -> String {
        try binds.append(value)
        return "$\(binds.count)"
    }

    /// `sql` with the values bound so far.
    func query(_ sql: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: sql, binds: binds)
    }
}
