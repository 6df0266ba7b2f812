import Configuration

/// Where a part of the program reads its settings: the environment over the configuration file,
/// through one `ConfigReader`, at a scope (`worker`, `apps[0]`), with the names messages use.
public struct SettingsSource: Sendable {
    /// The values at this scope; read with the type the key's ``SettingShape`` gives (the file
    /// and the environment were checked against it, so a read never fails on its type).
    public let reader: ConfigReader
    /// The file, for messages: `the configuration file '/etc/revoker.json'`.
    public let place: String
    /// How messages name this scope's keys: `""`, `"worker."`, `"apps[0]."`.
    private let shown: String
    private let scope: [String]
    /// The variable that set each key the environment set, by dotted key.
    private let setByEnvironment: [String: String]

    public init(reader: ConfigReader, place: String, setByEnvironment: [String: String]) {
        self.init(reader: reader, place: place, shown: "", scope: [], setByEnvironment: setByEnvironment)
    }

    private init(reader: ConfigReader, place: String, shown: String, scope: [String], setByEnvironment: [String: String]) {
        self.reader = reader
        self.place = place
        self.shown = shown
        self.scope = scope
        self.setByEnvironment = setByEnvironment
    }

    /// The section at `key` (an object of the file).
    public func scoped(to key: String) -> SettingsSource {
        let components = key.split(separator: ".").map(String.init)
        return SettingsSource(
            reader: reader.scoped(to: ConfigKey(components)),
            place: place,
            shown: shown + key + ".",
            scope: scope + components,
            setByEnvironment: setByEnvironment
        )
    }

    /// The objects of the list at `key` (``SettingShape/entries(_:)``), in the file's order.
    public func entries(_ key: String) -> [SettingsSource] {
        let count = reader.int(forKey: ConfigKey(key)) ?? 0
        return (0..<count).map { index in
            SettingsSource(
                reader: reader.scoped(to: ConfigKey([key, String(index)])),
                place: place,
                shown: "\(shown)\(key)[\(index)].",
                scope: scope + [key, String(index)],
                setByEnvironment: setByEnvironment
            )
        }
    }

    /// The range of every `max_requests_per_second`: calls per second to a provider, by all workers together.
    public static let requestsPerSecond = 0.1...100_000.0

    /// This scope as messages name it: `apps[0]`, `worker`.
    public var name: String { String(shown.dropLast()) }

    /// How a message names where `key` was set: the variable, or the key in the file
    /// (`http.port in the configuration file '…'`).
    public func origin(_ key: String) -> String {
        setByEnvironment[(scope + [key]).joined(separator: ".")] ?? "\(shown)\(key) in \(place)"
    }

    /// The integer at `key` when set; an error naming where it was set when it lies outside `range`.
    public func int(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        try within(reader.int(forKey: ConfigKey(key)), key, range)
    }

    /// The number at `key` when set; an error naming where it was set when it lies outside `range`.
    public func double(_ key: String, in range: ClosedRange<Double>) throws -> Double? {
        try within(reader.double(forKey: ConfigKey(key)), key, range)
    }

    /// A number of seconds, read as ``double(_:in:)`` does.
    public func seconds(_ key: String, in range: ClosedRange<Double>) throws -> Duration? {
        try double(key, in: range).map { .milliseconds(Int64($0 * 1000)) }
    }

    private func within<T: Comparable>(_ value: T?, _ key: String, _ range: ClosedRange<T>) throws -> T? {
        guard let value else { return nil }
        guard range.contains(value) else {
            throw ConfigurationError("\(origin(key)) must be between \(range.lowerBound) and \(range.upperBound).")
        }
        return value
    }
}
