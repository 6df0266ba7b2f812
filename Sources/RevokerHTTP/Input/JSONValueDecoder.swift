import RevokerProvider

/// Decodes a `Decodable` from the ``JSONValue`` tree ``StrictJSON`` read, more strictly than
/// `JSONDecoder`: an object holds only its type's fields (when its `CodingKeys` are
/// `CaseIterable`; a refusal is ``APIProblem`` 400), `null` is refused wherever it is (even for
/// an optional: leave the field out instead), and an integer is written without a fraction or an
/// exponent (`1.0`, `1e2` are refused). Other refusals are `DecodingError`s.
struct JSONValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = try present() else { throw mismatch([String: JSONValue].self) }
        if let keys = Key.self as? any (CodingKey & CaseIterable).Type {
            let known = Self.names(keys)
            if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                throw APIProblem.badRequest(
                    "Unknown field; known fields: \(known.sorted().joined(separator: ", ")).",
                    field: StrictJSONDecoder.fieldName(codingPath + [AnyKey(unknown)])
                )
            }
        }
        return KeyedDecodingContainer(KeyedContainer(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = try present() else { throw mismatch([JSONValue].self) }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: The value itself

    /// The value; `null` is refused rather than read as absent.
    func present() throws -> JSONValue {
        guard value != .null else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "null is not accepted"))
        }
        return value
    }

    func mismatch(_ type: Any.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type)"))
    }

    /// Never true: `Optional` then decodes its value, and ``present()`` refuses a null.
    func decodeNil() -> Bool { false }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = try present() else { throw mismatch(type) }
        return bool
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let string) = try present() else { throw mismatch(type) }
        return string
    }

    func decode(_ type: Double.Type) throws -> Double { try floatingPoint(type) }
    func decode(_ type: Float.Type) throws -> Float { try floatingPoint(type) }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }

    /// The number as written: digits only, so a fraction, an exponent or an overflow is refused.
    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number(let text) = try present(), let integer = T(text, radix: 10) else { throw mismatch(type) }
        return integer
    }

    func floatingPoint<T: LosslessStringConvertible & BinaryFloatingPoint>(_ type: T.Type) throws -> T {
        guard case .number(let text) = try present(), let number = T(text), number.isFinite else { throw mismatch(type) }
        return number
    }

    static func names<Key: CodingKey & CaseIterable>(_ keys: Key.Type) -> Set<String> { Set(keys.allCases.map(\.stringValue)) }
}

/// A key of a path that no `CodingKeys` names: an array's index, an unknown field, `super`.
private struct AnyKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(_ string: String) {
        stringValue = string
        intValue = nil
    }

    init(stringValue: String) { self.init(stringValue) }

    init(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSONValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    /// The decoder of a field; a missing field is `keyNotFound`.
    func field(_ key: any CodingKey) throws -> JSONValueDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
        }
        return JSONValueDecoder(value: value, codingPath: codingPath + [key])
    }

    // `decodeIfPresent` asks this first: a null is refused rather than read as absent.
    func decodeNil(forKey key: Key) throws -> Bool {
        _ = try field(key).present()
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try field(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try field(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try field(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try field(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try field(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try field(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try field(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try field(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try field(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try field(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try field(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try field(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try field(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try field(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try field(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try field(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try field(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { try field(AnyKey("super")) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try field(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// The decoder of the current element.
    func current() throws -> JSONValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the array has no more elements"))
        }
        return JSONValueDecoder(value: elements[currentIndex], codingPath: codingPath + [AnyKey(intValue: currentIndex)])
    }

    /// The decoder of the current element, moving past it.
    mutating func next() throws -> JSONValueDecoder {
        let decoder = try current()
        currentIndex += 1
        return decoder
    }

    func decodeNil() throws -> Bool {
        _ = try current().present()
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}
