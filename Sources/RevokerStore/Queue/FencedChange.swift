import Foundation

/// A change to running requests that applies only while the caller's lease is current. Every
/// fenced write of the queue is one of these, applied by ``RevocationQueue/applyFenced(_:)``.
protocol FencedChange: Encodable, Sendable {
    /// The change's columns in the input rows, as `jsonb_to_recordset` declares them.
    static var columns: String { get }
    /// The assignments, over `r` (the request) and `i` (its input row); may be empty.
    static var assignments: String { get }
    /// Whether the change ends the credential's stay in the SQL intake table.
    static var erasesIntake: Bool { get }
    /// More data-modifying CTEs of the same statement (`name AS (…)`, comma-led), over `changed`
    /// (the requests changed, with their `grant_id`) and `input`; empty for most changes.
    static var alsoChanges: String { get }
    /// Whether the change ends the request (kept among the writes acknowledged).
    static var ends: Bool { get }
}

extension FencedChange {
    static var alsoChanges: String { "" }
    static var ends: Bool { false }
}

/// One request's fenced change: the lease that must still be current, the events to write
/// with it, and the change's own columns (encoded beside the others, in one JSON object).
struct FencedRow<Change: FencedChange>: Encodable, Sendable {
    enum CodingKeys: String, CodingKey {
        case id
        case fencingToken = "fencing_token"
        case owner
        case events
    }
    var id: UUID
    var fencingToken: Int64
    var owner: String
    var events: [AuditWriter.Row]
    var change: Change

    init(_ lease: Lease, events: [AuditEvent] = [], _ change: Change) {
        id = lease.requestID
        fencingToken = lease.fencingToken
        owner = lease.owner
        self.events = events.map(AuditWriter.Row.init)
        self.change = change
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(fencingToken, forKey: .fencingToken)
        try container.encode(owner, forKey: .owner)
        try container.encode(events, forKey: .events)
        try change.encode(to: encoder)
    }
}

/// The fenced changes of the queue.
enum Fenced {
    /// A final state: outcome, last error, and the credential erased unless `keep`.
    struct Finish: FencedChange {
        static let ends = true
        enum CodingKeys: String, CodingKey {
            case state, outcome, keep
            case errorCode = "error_code"
            case errorDescription = "error_description"
        }
        var state: String
        var outcome: String
        var keep: Bool
        var errorCode: String?
        var errorDescription: String?

        static let columns = "state text, outcome text, keep bool, error_code text, error_description text"
        static let assignments = """
            state = i.state, outcome = i.outcome, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
            last_error_code = i.error_code, last_error_description = i.error_description,
            sealed_credential = CASE WHEN i.keep THEN r.sealed_credential END,
            credential_key_id = CASE WHEN i.keep THEN r.credential_key_id END
            """
        static let erasesIntake = true
    }

    /// A new sealed credential (after a code exchange, the refresh token) and its kind.
    struct Replace: FencedChange {
        enum CodingKeys: String, CodingKey {
            case kind, sealed
            case keyID = "key_id"
        }
        var kind: String
        /// Base64 of the sealed bytes (sealed: no secret in the clear).
        var sealed: String
        var keyID: String

        static let columns = "kind text, sealed text, key_id text"
        static let assignments = "credential_kind = i.kind, sealed_credential = decode(i.sealed, 'base64'), credential_key_id = i.key_id"
        static let erasesIntake = true
    }

    /// Back to `pending` after `delay_ms`; the attempt given back unless `counts`; the last
    /// error replaced unless `keep_error`.
    struct Reschedule: FencedChange {
        enum CodingKeys: String, CodingKey {
            case delayMilliseconds = "delay_ms"
            case counts
            case keepError = "keep_error"
            case errorCode = "error_code"
            case errorDescription = "error_description"
        }
        var delayMilliseconds: Int64
        var counts: Bool
        var keepError: Bool
        var errorCode: String?
        var errorDescription: String?

        static let columns = "delay_ms int8, counts bool, keep_error bool, error_code text, error_description text"
        static let assignments = """
            state = 'pending', lease_owner = NULL, lease_expires_at = NULL,
            run_after = now() + make_interval(secs => i.delay_ms::float8 / 1000.0),
            attempts = CASE WHEN i.counts THEN r.attempts ELSE greatest(r.attempts - 1, 0) END,
            last_error_code = CASE WHEN i.keep_error THEN r.last_error_code ELSE i.error_code END,
            last_error_description = CASE WHEN i.keep_error THEN r.last_error_description ELSE i.error_description END
            """
        static let erasesIntake = false
    }

    /// The lease's expiry moved to now + `extend_ms`.
    struct Extend: FencedChange {
        enum CodingKeys: String, CodingKey {
            case extendMilliseconds = "extend_ms"
        }
        var extendMilliseconds: Int64

        static let columns = "extend_ms int8"
        static let assignments = "lease_expires_at = now() + make_interval(secs => i.extend_ms::float8 / 1000.0)"
        static let erasesIntake = false
    }

    /// The end of a hold request that took its grant into custody: the request succeeds as
    /// `held` (its code erased) and, in the same statement, the grant holds the sealed refresh
    /// token, bound to the verified user when the identity token named one.
    struct Hold: FencedChange {
        static let ends = true
        enum CodingKeys: String, CodingKey {
            case sealed
            case keyID = "key_id"
            case kind
            case userID = "user_id"
        }
        /// Base64 of the token sealed for the grant.
        var sealed: String
        var keyID: String
        /// The sealed token's kind.
        var kind: String
        /// The verified `sub`, when the exchange's identity token verified.
        var userID: String?

        static let columns = "sealed text, key_id text, kind text, user_id text"
        static let assignments = """
            state = 'succeeded', outcome = 'held', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
            last_error_code = NULL, last_error_description = NULL, sealed_credential = NULL, credential_key_id = NULL,
            apple_user_id = coalesce(r.apple_user_id, i.user_id)
            """
        static let erasesIntake = true
        static let alsoChanges = """
            , held AS (
                UPDATE revoker.grants g
                SET state = 'held', sealed_token = decode(i.sealed, 'base64'), token_key_id = i.key_id, token_kind = i.kind,
                    held_at = now(), updated_at = now(),
                    user_id = coalesce(i.user_id, g.user_id),
                    user_source = CASE WHEN i.user_id IS NOT NULL THEN 'verified_id_token' ELSE g.user_source END
                FROM changed c JOIN input i ON i.id = c.id
                WHERE g.id = c.grant_id AND g.state = 'pending'
            )
            """
    }

    /// Nothing but the events.
    struct Record: FencedChange {
        func encode(to encoder: any Encoder) throws {}

        static let columns = ""
        static let assignments = ""
        static let erasesIntake = false
    }
}
