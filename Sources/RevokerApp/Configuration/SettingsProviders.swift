import Configuration
import Foundation
import RevokerProvider

/// The configuration file and the environment as swift-configuration providers, each checked
/// against the settings' shapes first: an unknown key or a wrong type is a one-line error here,
/// so the reads after it (which fall back to their default on a mismatch) never meet one.
enum SettingsProviders {
    /// The file at `path`, read strictly: every key known, every value of its key's shape.
    /// Objects become dotted keys; a list of objects (`apps`) holds its count, its entries
    /// follow as `apps.0.client_id`.
    static func file(at path: String, shape: [String: SettingShape]) throws -> InMemoryProvider {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(
                "The configuration file '\(path)' does not exist or cannot be read (--config or \(RevokerConfiguration.Variable.configFile))."
            )
        }
        let document: JSONValue
        do {
            document = try StrictJSON.parse(Array(data))
        } catch {
            throw ConfigurationError("The configuration file '\(path)' is not valid JSON: \(error.reason).")
        }
        guard case .object(let top) = document else {
            throw ConfigurationError("The configuration file '\(path)' must hold a JSON object.")
        }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        try flatten(top, shape, at: [], shown: "", file: path, into: &values)
        return InMemoryProvider(name: "configuration file", values: values)
    }

    private static func flatten(
        _ object: [String: JSONValue],
        _ keys: [String: SettingShape],
        at path: [String],
        shown: String,
        file: String,
        into values: inout [AbsoluteConfigKey: ConfigValue]
    ) throws {
        if let unknown = object.keys.sorted().first(where: { keys[$0] == nil }) {
            throw ConfigurationError(
                "Unknown setting '\(unknown.prefix(60))' at \(shown.isEmpty ? "the top level" : shown) of '\(file)'; known: \(keys.keys.sorted().joined(separator: ", "))."
            )
        }
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            guard let shape = keys[key], value != .null else { continue }  // null is left out, as JSON APIs read it
            let here = path + [key]
            let field = shown.isEmpty ? key : "\(shown).\(key)"
            let wrongType = ConfigurationError("In the configuration file '\(file)', \(field) has the wrong type.")
            let content: ConfigContent
            switch (shape, value) {
            case (.string, .string(let text)), (.secretString, .string(let text)):
                content = .string(text)
            case (.integer, .number(let text)):
                guard let number = Double(text), let integer = Int(exactly: number) else { throw wrongType }
                content = .int(integer)
            case (.number, .number(let text)):
                guard let number = Double(text), number.isFinite else { throw wrongType }
                content = .double(number)
            case (.bool, .bool(let flag)):
                content = .bool(flag)
            case (.strings, .array(let items)):
                content = .stringArray(
                    try items.map { item in
                        guard case .string(let text) = item else { throw wrongType }
                        return text
                    }
                )
            case (.section(let inner), .object(let members)):
                try flatten(members, inner, at: here, shown: field, file: file, into: &values)
                continue
            case (.entries(let inner), .array(let items)):
                for (index, item) in items.enumerated() {
                    guard case .object(let members) = item else { throw ConfigurationError("\(field)[\(index)] in '\(file)' must be an object.") }
                    try flatten(members, inner, at: here + [String(index)], shown: "\(field)[\(index)]", file: file, into: &values)
                }
                content = .int(items.count)
            default:
                throw wrongType
            }
            values[AbsoluteConfigKey(here)] = ConfigValue(content, isSecret: shape.isSecret)
        }
    }

    /// The variables of `variables` set (and not empty) in `environment`, each at the key it
    /// sets; and which variable set each key, for messages.
    static func environment(
        _ environment: [String: String],
        variables: [SettingVariable]
    ) throws -> (provider: InMemoryProvider, setBy: [String: String]) {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var setBy: [String: String] = [:]
        for variable in variables {
            guard let text = environment[variable.name], !text.isEmpty else { continue }
            let content: ConfigContent
            switch variable.shape {
            case .integer:
                guard let integer = Int(text) else { throw ConfigurationError("\(variable.name) must be an integer.") }
                content = .int(integer)
            case .number:
                guard let number = Double(text), number.isFinite else { throw ConfigurationError("\(variable.name) must be a number.") }
                content = .double(number)
            case .bool:
                guard let flag = ["true": true, "false": false][text.lowercased()] else {
                    throw ConfigurationError("\(variable.name) must be true or false.")
                }
                content = .bool(flag)
            case .strings:
                content = .stringArray(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            case .string, .secretString, .section, .entries:
                content = .string(text)
            }
            let key = variable.key.split(separator: ".").map(String.init)
            values[AbsoluteConfigKey(key)] = ConfigValue(content, isSecret: variable.shape.isSecret)
            setBy[variable.key] = variable.name
        }
        return (InMemoryProvider(name: "environment", values: values), setBy)
    }
}
