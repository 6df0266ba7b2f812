import Foundation

/// What `revoker check` finds of one provider: sections of the report (JSON, never a secret),
/// one line per problem, and how many apps were checked.
public struct ProviderCheckReport: Sendable {
    /// Top-level keys of the report and their values (Apple's `apps`, Google's `google`).
    public var sections: [String: JSONValue]
    /// What failed, one line each; empty when all is well.
    public var problems: [String]
    /// How many apps were checked.
    public var appCount: Int

    public init(sections: [String: JSONValue], problems: [String], appCount: Int) {
        self.sections = sections
        self.problems = problems
        self.appCount = appCount
    }
}

extension JSONValue {
    /// A string, or null for nil.
    public static func string(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }

    /// An array of strings.
    public static func strings(_ texts: [String]) -> JSONValue { .array(texts.map { .string($0) }) }

    /// The value as Foundation's JSON objects, for `JSONSerialization`.
    public var foundationObject: Any {
        switch self {
        case .object(let object): object.mapValues(\.foundationObject)
        case .array(let array): array.map(\.foundationObject)
        case .string(let text): text
        case .number(let text): Int(text).map { $0 as Any } ?? Double(text).map { $0 as Any } ?? text
        case .bool(let flag): flag
        case .null: NSNull()
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}
