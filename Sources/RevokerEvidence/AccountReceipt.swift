import Foundation

/// Evidence for the deletion of a whole account, checked offline with the public key: the
/// deletion's own chain (asked, each grant it covered, each grant's end, its outcome) as a
/// receipt, and the receipt of every request it names and of each grant's hold, so every grant,
/// every call and every outcome is proven. The summary is derived again from the deletion's
/// rows by the verifier, and the whole file is signed.
public struct AccountReceipt: Codable, Sendable, Hashable, SignedEvidenceFile {
    public static let currentFormat = "revoker.audit.account-receipt.v1"

    public var format: String
    public var issuedAt: String
    public var summary: Summary
    /// The receipt of the deletion's own chain (its id is the chain key).
    public var deletion: AuditReceipt
    /// The receipts of its requests: each grant's revocation, the credential it carried, each
    /// grant's hold; ordered by request id.
    public var requests: [AuditReceipt]
    public var keyID: String
    public var signature: String

    enum CodingKeys: String, CodingKey {
        case format
        case issuedAt = "issued_at"
        case summary, deletion, requests
        case keyID = "key_id"
        case signature
    }

    /// What the deletion's rows say.
    public struct Summary: Codable, Sendable, Hashable {
        public var deletionID: String
        public var accountReference: String?
        public var requestedAt: String?
        public var requestedBy: String?
        public var outcome: String?
        public var completedAt: String?
        public var grants: [Grant]

        enum CodingKeys: String, CodingKey {
            case deletionID = "deletion_id"
            case accountReference = "account_reference"
            case requestedAt = "requested_at"
            case requestedBy = "requested_by"
            case outcome
            case completedAt = "completed_at"
            case grants
        }
    }

    /// One grant the deletion covered.
    public struct Grant: Codable, Sendable, Hashable {
        public var grantID: String
        public var provider: String?
        public var clientID: String?
        public var userID: String?
        /// The request that revoked it (none when it was not held when asked).
        public var requestID: String?
        /// Its state and outcome when the deletion completed.
        public var state: String?
        public var outcome: String?

        enum CodingKeys: String, CodingKey {
            case grantID = "grant_id"
            case provider
            case clientID = "client_id"
            case userID = "user_id"
            case requestID = "request_id"
            case state, outcome
        }
    }

    /// Builds and signs the receipt of a completed deletion from the receipts of its chain and
    /// its requests.
    public static func issue(deletion: AuditReceipt, requests: [AuditReceipt], issuedAtMicros: Int64, key: AuditSigningKey) throws -> AccountReceipt {
        var receipt = AccountReceipt(
            format: currentFormat,
            issuedAt: WireFormat.timestamp(micros: issuedAtMicros),
            summary: summarize(deletion.events.map(\.row), deletionID: deletion.summary.requestID),
            deletion: deletion,
            requests: requests.sorted { $0.summary.requestID < $1.summary.requestID },
            keyID: key.publicKey.keyID,
            signature: ""
        )
        try receipt.sign(with: key)
        return receipt
    }

    /// The summary the deletion's rows support: who asked and when, each grant from its
    /// `deletion_grant` and `grant_ended` rows, the outcome of `deletion_completed`.
    public static func summarize(_ rows: [AuditChainRow], deletionID: String) -> Summary {
        let asked = rows.first { $0.event == "deletion_requested" }
        let completed = rows.last { $0.event == "deletion_completed" }
        var grants: [Grant] = []
        func index(_ id: String) -> Int {
            if let found = grants.firstIndex(where: { $0.grantID == id }) { return found }
            grants.append(Grant(grantID: id))
            return grants.count - 1
        }
        for row in rows {
            let fields = Self.fields(row.detail)
            guard let grantID = fields["grant"], row.event == "deletion_grant" || row.event == "grant_ended" else { continue }
            let at = index(grantID)
            grants[at].clientID = row.clientID ?? grants[at].clientID
            grants[at].userID = row.userID ?? grants[at].userID
            if row.event == "deletion_grant" {
                grants[at].provider = fields["provider"]
                grants[at].requestID = fields["request"]
            } else {
                grants[at].state = fields["state"]
                grants[at].outcome = fields["outcome"]
            }
        }
        return Summary(
            deletionID: deletionID,
            accountReference: rows.first?.externalReference,
            requestedAt: asked.map { WireFormat.timestamp(micros: $0.occurredAtMicros) },
            requestedBy: asked?.actor,
            outcome: Self.fields(completed?.detail)["outcome"],
            completedAt: completed.map { WireFormat.timestamp(micros: $0.occurredAtMicros) },
            grants: grants
        )
    }

    /// `key=value` pairs of an audit row's detail.
    static func fields(_ detail: String?) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in (detail ?? "").split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// What checking an account receipt found: nothing when it holds.
    public struct Verification: Sendable {
        public var problems: [String]
        public var receipt: AccountReceipt?
        public var valid: Bool { problems.isEmpty }
    }

    /// Whether `bytes` are an account receipt (rather than a request's).
    public static func isAccountReceipt(_ bytes: Data) -> Bool {
        struct Format: Decodable { var format: String }
        return (try? JSONDecoder().decode(Format.self, from: bytes))?.format == currentFormat
    }

    /// Checks an account receipt against `keys`: its bytes canonical and signed; the deletion's
    /// receipt and every request's receipt valid on their own (see ``AuditReceipt/verify(_:keys:witnessed:)``);
    /// the deletion completed; every request it names present, of the same account; and the
    /// summary what the deletion's rows say.
    public static func verify(_ bytes: Data, keys: [AuditPublicKey], witnessed: [AuditCheckpoint] = []) -> Verification {
        let receipt: AccountReceipt
        do {
            receipt = try JSONDecoder().decode(AccountReceipt.self, from: bytes)
        } catch {
            return Verification(problems: ["the file is not an account receipt (not the JSON one has)"])
        }
        var problems = receipt.envelopeProblems(bytes, format: currentFormat, keys: keys)
        func check(_ inner: AuditReceipt, _ label: String) {
            guard let innerBytes = try? inner.canonicalBytes() else { return problems.append("\(label) cannot be encoded") }
            problems += AuditReceipt.verify(innerBytes, keys: keys, witnessed: witnessed).problems.map { "\(label): \($0)" }
        }
        check(receipt.deletion, "the deletion's receipt")
        let summary = summarize(receipt.deletion.events.map(\.row), deletionID: receipt.deletion.summary.requestID)
        if summary != receipt.summary { problems.append("the summary is not what the deletion's events say") }
        if summary.outcome == nil { problems.append("the deletion has not completed") }
        let account = summary.accountReference
        var carried: Set<String> = []
        for inner in receipt.requests {
            let id = inner.summary.requestID
            check(inner, "request \(id)")
            carried.insert(id)
            if inner.summary.externalReference != account { problems.append("request \(id) is of another account") }
        }
        for grant in summary.grants {
            if let request = grant.requestID, !carried.contains(request) {
                problems.append("grant \(grant.grantID)'s revocation request \(request) has no receipt here")
            }
        }
        return Verification(problems: problems, receipt: receipt)
    }
}
