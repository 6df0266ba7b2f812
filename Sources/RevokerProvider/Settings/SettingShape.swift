/// What a key of the configuration file holds, so that the file is read strictly: an unknown key
/// or a value of the wrong type is an error naming it, never a silent default.
public indirect enum SettingShape: Sendable {
    case string
    /// A string never shown (a database URL holds a password).
    case secretString
    /// A number without a fraction.
    case integer
    case number
    case bool
    /// A list of strings.
    case strings
    /// An object with these keys.
    case section([String: SettingShape])
    /// A list of objects with these keys (apps, webhooks), read with ``SettingsSource/entries(_:)``.
    case entries([String: SettingShape])

    /// Whether a value of this shape must never be shown.
    public var isSecret: Bool {
        if case .secretString = self { true } else { false }
    }
}

/// An environment variable and the key it sets; the environment wins over the file.
public struct SettingVariable: Sendable {
    /// `REVOKER_HTTP_PORT`.
    public var name: String
    /// The dotted key it sets (`http.port`); one the file has no key for (the one-app variables)
    /// is the environment's alone.
    public var key: String
    /// A scalar or ``SettingShape/strings`` (comma-separated).
    public var shape: SettingShape

    public init(_ name: String, sets key: String, _ shape: SettingShape = .string) {
        self.name = name
        self.key = key
        self.shape = shape
    }
}
