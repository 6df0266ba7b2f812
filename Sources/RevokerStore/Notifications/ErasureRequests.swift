import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// A person's request, through their provider, that the app delete their data: opened with the
/// provider's message (``ProviderMessage/opensErasure``), reached by an unguessable public code,
/// and decided by the app's backend. Never holds a credential.
public struct ErasureRequest: Sendable, Hashable {
    /// The public code: 20 characters of base32 (100 bits), the only way to its status page.
    public var code: String
    public var provider: String
    public var clientID: String
    /// The person's id at the provider; never shown on the status page.
    public var userID: String
    public var receivedAt: Date
    /// The sign-in grants held for the person that the request's message ended.
    public var grantsEnded: Int
    public var state: State
    /// Why the backend refused (shown to the person).
    public var justification: String?
    public var decidedAt: Date?

    /// Where the request stands.
    public enum State: String, Sendable, Hashable, Codable {
        /// Received; the app's backend has been told and has not answered yet.
        case received
        /// The backend confirmed it deleted the person's data.
        case deleted
        /// The backend refused, with a justification.
        case refused
    }
}

/// The erasure requests in PostgreSQL (`revoker.erasure_requests`).
public struct ErasureRequests: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The longest justification kept, in code points (as PostgreSQL counts).
    public static let maximumJustification = 2000

    /// Why `text` cannot be the justification the person reads, or nil when it can: 1 to
    /// ``maximumJustification`` code points, something besides white space, and no control
    /// character but line breaks and tabs.
    public static func justificationProblem(_ text: String) -> String? {
        let readable =
            (1...maximumJustification).contains(text.unicodeScalars.count)
            && !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            && !text.unicodeScalars.contains { $0.properties.generalCategory == .control && !"\n\r\t".unicodeScalars.contains($0) }
        return readable
            ? nil : "a justification the person can read: 1 to \(maximumJustification) characters, no control characters but line breaks"
    }

    /// A new public code: 20 characters of RFC 4648 base32 from the system's random source.
    static func newCode() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var generator = SystemRandomNumberGenerator()
        return String((0..<20).map { _ in alphabet[Int(generator.next(upperBound: UInt8(32)))] })
    }

    /// Whether `text` has the shape of a code (so that nothing else reaches the database).
    public static func isCode(_ text: String) -> Bool {
        text.utf8.count == 20 && text.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x32...0x37).contains($0) }
    }

    /// The request with this code, or nil.
    public func request(code: String, logger: Logger? = nil) async throws -> ErasureRequest? {
        guard Self.isCode(code) else { return nil }
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            let rows = try await client.query("SELECT \(unescaped: Self.columns) FROM revoker.erasure_requests WHERE code = \(code)", logger: logger)
                .collect()
            return try rows.first.map(Self.decode)
        }
    }

    /// What a decision did.
    public enum Decision: Sendable, Equatable {
        /// Recorded now.
        case recorded(ErasureRequest)
        /// The same decision was recorded before: nothing changed.
        case unchanged(ErasureRequest)
        /// Another decision was recorded before; it stands.
        case conflicting(ErasureRequest)
        /// No request with this code among `clientIDs`.
        case notFound
    }

    /// Records the backend's decision: `deleted`, or `refused` with a justification the person
    /// will read. A decision is made once; the same one again changes nothing. Audited on the
    /// app's chain (never the code or the user's data).
    public func decide(
        code: String,
        _ state: ErasureRequest.State,
        justification: String?,
        clientIDs: Set<String>?,
        actor: String,
        logger: Logger? = nil
    ) async throws -> Decision {
        guard state != .received else { throw RevokerStoreError(.invalidArgument, "a decision is deleted or refused") }
        guard (state == .refused) == (justification != nil) else {
            throw RevokerStoreError(.invalidArgument, "a refusal, and only a refusal, carries a justification")
        }
        if let justification, let problem = Self.justificationProblem(justification) {
            throw RevokerStoreError(.invalidArgument, "a refusal needs \(problem)")
        }
        guard Self.isCode(code) else { return .notFound }
        let logger = logger ?? self.logger
        let clients = clientIDs.map { Array($0) }
        return try await StoreDatabase.run(logger) {
            try await client.withTransaction(logger: logger) { connection in
                let rows = try await connection.query(
                    """
                    SELECT \(unescaped: Self.columns) FROM revoker.erasure_requests
                    WHERE code = \(code) AND (\(clients)::text[] IS NULL OR client_id = ANY(\(clients)::text[]))
                    FOR UPDATE
                    """,
                    logger: logger
                ).collect()
                guard let existing = try rows.first.map(Self.decode) else { return .notFound }
                if existing.state != .received {
                    return existing.state == state && existing.justification == justification ? .unchanged(existing) : .conflicting(existing)
                }
                let updated = try await connection.query(
                    """
                    UPDATE revoker.erasure_requests
                    SET state = \(state.rawValue), justification = \(justification), decided_at = now(), decided_by = \(actor)
                    WHERE code = \(code)
                    RETURNING \(unescaped: Self.columns)
                    """,
                    logger: logger
                ).collect()
                guard let decided = try updated.first.map(Self.decode) else {
                    throw RevokerStoreError(.unexpectedData, "the erasure request vanished")
                }
                let detail =
                    state == .deleted
                    ? "\(existing.provider) erasure request received \(WireFormat.timestamp(existing.receivedAt)): the app deleted the person's data"
                    : "\(existing.provider) erasure request received \(WireFormat.timestamp(existing.receivedAt)): the app refused, with a justification"
                try await AuditWriter.write(
                    [AuditEvent(.note, detail: detail)],
                    clientID: existing.clientID,
                    actor: actor,
                    on: connection,
                    logger: logger
                )
                return .recorded(decided)
            }
        }
    }

    static let columns = "code, provider, client_id, user_id, received_at, grants_ended, state, justification, decided_at"

    static func decode(_ row: PostgresRow) throws -> ErasureRequest {
        let (code, provider, clientID, userID, receivedAt, grantsEnded, state, justification, decidedAt) = try row.decode(
            (String, String, String, String, Date, Int, String, String?, Date?).self
        )
        guard let state = ErasureRequest.State(rawValue: state) else {
            throw RevokerStoreError(.unexpectedData, "an erasure request's state is unknown")
        }
        return ErasureRequest(
            code: code,
            provider: provider,
            clientID: clientID,
            userID: userID,
            receivedAt: receivedAt,
            grantsEnded: grantsEnded,
            state: state,
            justification: justification,
            decidedAt: decidedAt
        )
    }
}
