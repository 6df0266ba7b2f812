import Foundation
import HTTPTypes
import Hummingbird
import RevokerProvider

/// The API's ``RequestDecoder``: a request body is a JSON object, read strictly before the body
/// type sees it. Content type (415), size (413, the context's `maxUploadSize`), strict syntax
/// (``StrictJSON``, 400), only the type's fields (400) and no `null` (422) are checked; a value of
/// the wrong type or a missing field is 422. Every refusal names the field and never repeats a
/// submitted value.
///
/// A body type lists its fields with `CodingKeys: CaseIterable`; keys of other types (a
/// dictionary's) are not checked.
public struct StrictJSONDecoder: RequestDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        guard let contentType = request.headers[.contentType], Self.isJSON(contentType) else {
            throw APIProblem(.unsupportedMediaType, "The body must be application/json.", field: "Content-Type")
        }
        let limit = context.maxUploadSize
        let bytes = try await request.bodyBytes(
            upTo: limit,
            tooLarge: APIProblem(.contentTooLarge, "The request body is larger than \(limit) bytes.")
        )
        let object: [String: JSONValue]
        do {
            object = try StrictJSON.object(bytes)
        } catch {
            throw APIProblem.badRequest(error.reason)
        }
        do {
            return try T(from: JSONValueDecoder(value: .object(object)))
        } catch let error as DecodingError {
            throw Self.problem(error)
        }
    }

    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return mediaType == "application/json"
    }

    /// The refusal for a value the body type could not take. The detail is fixed text: a
    /// `DecodingError`'s own description may quote the value.
    static func problem(_ error: DecodingError) -> APIProblem {
        switch error {
        case .keyNotFound(let key, let context):
            return APIProblem(.unprocessableContent, "This field is required.", field: fieldName(context.codingPath + [key]))
        case .valueNotFound(_, let context):
            return APIProblem(.unprocessableContent, "Leave this field out instead of sending null.", field: fieldName(context.codingPath))
        case .typeMismatch(let type, let context):
            return APIProblem(.unprocessableContent, "This field must be \(kind(type)).", field: fieldName(context.codingPath))
        case .dataCorrupted(let context):
            return APIProblem(.unprocessableContent, "This field has a value it cannot take.", field: fieldName(context.codingPath))
        @unknown default:
            return APIProblem(.unprocessableContent, "The body has a value it cannot take.")
        }
    }

    /// A field's path as a problem names it (`a.b.0`; nil for the body itself): printable
    /// ASCII, at most 64 characters, as a submitted key may be anything.
    static func fieldName(_ path: [any CodingKey]) -> String? {
        guard !path.isEmpty else { return nil }
        let name = path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return String(name.unicodeScalars.filter { (0x21...0x7E).contains($0.value) }.prefix(64).map(Character.init))
    }

    static func kind(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is any BinaryInteger.Type: "an integer"
        case is any BinaryFloatingPoint.Type: "a number"
        case is Bool.Type: "true or false"
        case is [JSONValue].Type: "an array"
        default: "an object"
        }
    }
}
