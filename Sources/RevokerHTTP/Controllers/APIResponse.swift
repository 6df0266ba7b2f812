import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import RevokerEvidence
import RevokerProvider
import RevokerStore

/// Runs one database call of a request under ``HTTPSettings/databaseTimeout``: a client learns
/// of an unreachable database (503) before its own timeout gives up. Each call is timed into
/// `revoker_database_call_duration_seconds{caller="api"}` when `metrics` is given.
struct DatabaseDeadline: Sendable {
    let limit: Duration
    var metrics: APIMetrics?

    func callAsFunction<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let metrics else { return try await withDeadline(limit, body) }
        let started = ContinuousClock.now
        do {
            let value = try await withDeadline(limit, body)
            metrics.databaseCall(succeeded: true, duration: ContinuousClock.now - started)
            return value
        } catch {
            metrics.databaseCall(succeeded: false, duration: ContinuousClock.now - started)
            throw error
        }
    }
}

/// How handlers' values are answered (``APIRequestContext/responseEncoder``): JSON with sorted
/// keys, as `application/json`; a handler sets another status with `EditedResponse`.
public struct APIResponseEncoder: ResponseEncoder {
    public init() {}

    public func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value)))
        )
    }
}

/// What every controller reads from a request the same way, and the headers it answers with.
enum APIResponse {
    /// The header that carries the cursor to continue from.
    static let nextCursorHeader = HTTPField.Name("Revoker-Next-Cursor")!

    /// Whether `Accept` lists `mediaType` (a plain check; CSV is asked for explicitly).
    static func accepts(_ request: Request, _ mediaType: String) -> Bool {
        request.headers[values: .accept].contains { value in
            value.split(separator: ",").contains { $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == mediaType }
        }
    }

    static func id(_ context: APIRequestContext) throws -> UUID {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
            throw APIProblem.badRequest("The revocation id must be a UUID.", field: "id")
        }
        return id
    }
}
