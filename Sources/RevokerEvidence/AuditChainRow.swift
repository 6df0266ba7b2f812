import Crypto
import Foundation

/// An audit row as its chain hashes it: the fields in the order `revoker.audit_row_hash`
/// (migration 0006) encodes them. Anyone holding these values can recompute the hash.
public struct AuditChainRow: Sendable, Hashable, Codable {
    public var chainKey: String
    public var chainSeq: Int64
    public var id: Int64
    /// `occurred_at` in microseconds since 1970 (exact, unlike a `Date`).
    public var occurredAtMicros: Int64
    public var txid: UInt64
    public var requestID: UUID?
    public var clientID: String?
    public var externalReference: String?
    public var userID: String?
    public var event: String
    public var attempt: Int?
    public var actor: String
    public var providerEndpoint: String?
    public var httpStatus: Int?
    public var providerError: String?
    public var providerErrorDescription: String?
    public var latencyMilliseconds: Int?
    public var detail: String?
    public var recordedBy: String?

    enum CodingKeys: String, CodingKey {
        case chainKey = "chain_key"
        case chainSeq = "chain_seq"
        case id
        case occurredAtMicros = "occurred_at_us"
        case txid
        case requestID = "request_id"
        case clientID = "client_id"
        case externalReference = "external_reference"
        case userID = "apple_user_id"
        case event, attempt, actor
        case providerEndpoint = "apple_endpoint"
        case httpStatus = "http_status"
        case providerError = "apple_error"
        case providerErrorDescription = "apple_error_description"
        case latencyMilliseconds = "latency_ms"
        case detail
        case recordedBy = "recorded_by"
    }

    public init(
        chainKey: String,
        chainSeq: Int64,
        id: Int64,
        occurredAtMicros: Int64,
        txid: UInt64,
        requestID: UUID?,
        clientID: String?,
        externalReference: String?,
        userID: String?,
        event: String,
        attempt: Int?,
        actor: String,
        providerEndpoint: String?,
        httpStatus: Int?,
        providerError: String?,
        providerErrorDescription: String?,
        latencyMilliseconds: Int?,
        detail: String?,
        recordedBy: String?
    ) {
        self.chainKey = chainKey
        self.chainSeq = chainSeq
        self.id = id
        self.occurredAtMicros = occurredAtMicros
        self.txid = txid
        self.requestID = requestID
        self.clientID = clientID
        self.externalReference = externalReference
        self.userID = userID
        self.event = event
        self.attempt = attempt
        self.actor = actor
        self.providerEndpoint = providerEndpoint
        self.httpStatus = httpStatus
        self.providerError = providerError
        self.providerErrorDescription = providerErrorDescription
        self.latencyMilliseconds = latencyMilliseconds
        self.detail = detail
        self.recordedBy = recordedBy
    }

    /// The hash a chain's first row follows.
    public static let genesis = [UInt8](repeating: 0, count: 32)

    /// The row's hash after `previous`: what the database's trigger stored, unless the row or
    /// the chain before it was changed.
    public func hash(after previous: [UInt8]) -> [UInt8] {
        var encoder = CanonicalEncoder(domain: "revoker.audit.v1")
        encoder.append(raw: previous)
        encoder.append(chainKey)
        encoder.append(String(chainSeq))
        encoder.append(String(id))
        encoder.append(String(occurredAtMicros))
        encoder.append(String(txid))
        encoder.append(requestID.map { $0.uuidString.lowercased() })
        encoder.append(clientID)
        encoder.append(externalReference)
        encoder.append(userID)
        encoder.append(event)
        encoder.append(attempt.map(String.init))
        encoder.append(actor)
        encoder.append(providerEndpoint)
        encoder.append(httpStatus.map(String.init))
        encoder.append(providerError)
        encoder.append(providerErrorDescription)
        encoder.append(latencyMilliseconds.map(String.init))
        encoder.append(detail)
        encoder.append(recordedBy)
        return encoder.sha256()
    }

    /// When the row says it happened.
    public var occurredAt: Date { Date(timeIntervalSince1970: Double(occurredAtMicros) / 1_000_000) }
}

/// The encoding hashes and signatures are taken over: a domain string, then each field as
/// 0x00 (absent) or 0x01, its UTF-8 length (4 bytes, big-endian) and its bytes.
struct CanonicalEncoder {
    private(set) var bytes: [UInt8]

    init(domain: String) {
        bytes = Array(domain.utf8)
    }

    mutating func append(raw: [UInt8]) {
        bytes += raw
    }

    mutating func append(raw: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: raw)
    }

    mutating func append(_ value: String?) {
        guard var value else {
            bytes.append(0)
            return
        }
        value.withUTF8 { append(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// A field given as its UTF-8 bytes (nil: absent).
    mutating func append(utf8 value: UnsafeRawBufferPointer?) {
        guard let value else {
            bytes.append(0)
            return
        }
        let length = UInt32(value.count)
        bytes.append(1)
        bytes += [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)]
        bytes.append(contentsOf: value)
    }

    /// Starts again with `domain`, keeping the buffer.
    mutating func reset(domain: [UInt8]) {
        bytes.removeAll(keepingCapacity: true)
        bytes += domain
    }

    func sha256() -> [UInt8] {
        Array(SHA256.hash(data: bytes))
    }
}

/// Rehashes audit rows from their fields' UTF-8 bytes (each as `revoker.audit_row_hash` casts it
/// to text), reusing one buffer: the verifier's pass over a whole trail makes no `String` per
/// field. Gives what ``AuditChainRow/hash(after:)`` gives for the same row.
public struct AuditRowHasher {
    private static let domain = Array("revoker.audit.v1".utf8)
    private var encoder = CanonicalEncoder(domain: "")

    public init() {}

    /// Starts a row that follows `previous`.
    public mutating func start(after previous: UnsafeRawBufferPointer) {
        encoder.reset(domain: Self.domain)
        encoder.append(raw: previous)
    }

    /// The next field, in ``AuditChainRow/hash(after:)``'s order (nil: absent).
    public mutating func append(_ field: UnsafeRawBufferPointer?) {
        encoder.append(utf8: field)
    }

    /// Whether the row's fields give `stored`.
    public func matches(_ stored: UnsafeRawBufferPointer) -> Bool {
        SHA256.hash(data: encoder.bytes).withUnsafeBytes { $0.elementsEqual(stored) }
    }
}
