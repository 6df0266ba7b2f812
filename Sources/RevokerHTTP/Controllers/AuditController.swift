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

/// `/v1/audit`: the audit trail, its verification, and a request's signed receipt.
struct AuditController {
    let database: PostgresClient
    let audit: AuditLog
    let keys: APIKeys
    /// The public keys that verify the trail's checkpoints.
    let auditKeys: [AuditPublicKey]
    /// Signs receipts (and the checkpoints they need); without it there are none.
    let auditSigner: AuditSigner?
    /// The kinds `?event=` may name: the store's and the providers' messages'.
    let eventKinds: [AuditEventKind]
    let verifications = AuditVerificationGate()
    let store: DatabaseDeadline
    let logger: Logger

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.get("revocations/{id}/receipt") { request, context in try await receipt(request, context: context) }
        group.get("deletions/{id}/receipt") { request, context in
            let caller = try keys.authorize(request, .auditRead)
            let id = try APIResponse.id(context)
            return try Self.receiptDownload(try await issueAccountReceipt(id, for: caller), id: id)
        }
        group.get("audit") { request, context in try await auditTrail(request, context: context) }
        group.get("audit/verify") { request, _ in try await verifyAudit(request) }
    }

    func auditTrail(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .auditRead)
        let query = try QueryInput(
            request,
            allowed: ["request_id", "external_reference", "client_id", "apple_user_id", "event", "from", "to", "cursor", "limit"]
        )
        var events: [AuditEventKind]?
        if let name = query.values["event"] {
            guard let kind = eventKinds.first(where: { $0.rawValue == name }) else {
                throw APIProblem.badRequest("Unknown event; known: \(eventKinds.map(\.rawValue).joined(separator: ", ")).", field: "event")
            }
            events = [kind]
        }
        var auditQuery = AuditQuery(
            requestID: try query.uuid("request_id"),
            externalReference: try query.string("external_reference"),
            clientID: try query.string("client_id"),
            userID: try query.string("apple_user_id"),
            from: try query.date("from"),
            to: try query.date("to"),
            events: events,
            cursor: try query.string("cursor", length: 1...200),
            limit: try query.integer("limit", range: 1...1000) ?? 100
        )
        if let clientID = auditQuery.clientID { try caller.require(clientID) }
        auditQuery.clientIDs = caller.filter
        let page: AuditPage
        do {
            page = try await store { [audit, auditQuery, logger = context.logger] in try await audit.query(auditQuery, logger: logger) }
        } catch let error as RevokerStoreError where error.code == .invalidArgument {
            throw APIProblem.badRequest("The cursor is not one this API returned.", field: "cursor")
        }
        var headers: HTTPFields = [:]
        if let next = page.nextCursor { headers[APIResponse.nextCursorHeader] = next }
        if APIResponse.accepts(request, "text/csv") {
            headers[.contentType] = "text/csv; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: AuditExport.csv(page.records))))
        }
        headers[.contentType] = "application/json"
        let records = page.records.map(AuditExport.jsonObject).joined(separator: ",")
        let text = "{\"records\":[\(records)],\"next_cursor\":\(page.nextCursor.map(WireFormat.jsonString) ?? "null")}"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A request's signed receipt (`revoker audit receipt`): JSON, or a printable page for
    /// `Accept: text/html`. It comes from the audit trail, so it outlives the pruned request.
    func receipt(_ request: Request, context: APIRequestContext) async throws -> Response {
        let caller = try keys.authorize(request, .auditRead)
        let id = try APIResponse.id(context)
        let receipt = try await issueReceipt(id, for: caller)
        if APIResponse.accepts(request, "text/html") { return Self.receiptPage(receipt) }
        return try Self.receiptDownload(receipt, id: id)
    }

    /// The signed receipt of request `id`, when the caller's key reaches its app.
    func issueReceipt(_ id: UUID, for caller: APICaller) async throws -> AuditReceipt {
        guard let signer = auditSigner else {
            throw APIProblem(.notImplemented, "Receipts need the audit signing key: set audit.signing_key_file.")
        }
        let receipts = AuditReceipts(client: database, logger: logger)
        // Longer than one statement: it may wait for a checkpoint to cover the latest rows.
        let issued = try await withDeadline(store.limit + .seconds(15)) {
            try await receipts.issue(requestID: id, signer: signer, wait: .seconds(10))
        }
        guard let receipt = issued else {
            throw APIProblem.notFound("The audit trail has no revocation with this id.")
        }
        if let clientID = receipt.summary.clientID, caller.clientIDs?.contains(clientID) == false {
            throw APIProblem.notFound("The audit trail has no revocation with this id.")
        }
        return receipt
    }

    /// The signed receipt of completed account deletion `id`, when the caller's key reaches every
    /// app it names (it holds each one's requests); 409 while the deletion runs.
    func issueAccountReceipt(_ id: UUID, for caller: APICaller) async throws -> AccountReceipt {
        guard let signer = auditSigner else {
            throw APIProblem(.notImplemented, "Receipts need the audit signing key: set audit.signing_key_file.")
        }
        let receipts = AuditReceipts(client: database, logger: logger)
        let issued: AccountReceipt?
        do {
            // Longer than one statement: it may wait for a checkpoint to cover the latest rows.
            issued = try await withDeadline(store.limit + .seconds(15)) {
                try await receipts.issueAccount(deletionID: id, signer: signer, wait: .seconds(10))
            }
        } catch let error as RevokerStoreError where error.code == .conflict {
            throw APIProblem(.conflict, "The deletion is still under way; its receipt is issued once it completed.")
        }
        let apps = Set(([issued?.deletion] + (issued?.requests ?? [])).compactMap { $0?.summary.clientID })
        guard let receipt = issued, apps.allSatisfy(caller.reaches) else {
            throw APIProblem.notFound("There is no completed account deletion with this id for the apps this key reaches.")
        }
        return receipt
    }

    /// A receipt as a printable page: its own styles inline, nothing else allowed.
    static func receiptPage(_ receipt: AuditReceipt) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'"],
            body: .init(byteBuffer: ByteBuffer(string: receipt.html()))
        )
    }

    /// A receipt as the signed JSON file, to keep and verify offline.
    static func receiptDownload(_ receipt: AuditReceipt, id: UUID) throws -> Response {
        download(try receipt.canonicalBytes(), name: "receipt-\(id.uuidString.lowercased()).json")
    }

    /// An account's receipt as the signed JSON file.
    static func receiptDownload(_ receipt: AccountReceipt, id: UUID) throws -> Response {
        download(try receipt.canonicalBytes(), name: "account-receipt-\(id.uuidString.lowercased()).json")
    }

    private static func download(_ bytes: Data, name: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "application/json", .contentDisposition: "attachment; filename=\"\(name)\""],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    /// What `revoker audit verify` answers. A key limited to some apps verifies one of them.
    func verifyAudit(_ request: Request) async throws -> Response {
        let caller = try keys.authorize(request, .auditRead)
        let query = try QueryInput(request, allowed: ["since", "client_id"])
        let clientID = try query.string("client_id")
        if let clientID {
            try caller.require(clientID)
        } else if caller.filter != nil {
            throw APIProblem.badRequest("This API key is limited to some apps: name one with client_id.", field: "client_id")
        }
        let since = try query.date("since")
        let verifier = AuditVerifier(client: database, logger: logger)
        let keys = auditKeys
        // Reading every row takes longer than one statement's deadline.
        let question = "\(since.map { "\($0.timeIntervalSince1970)" } ?? "-") \(clientID ?? "-")"
        let answer = try await verifications.verify(question) {
            try await withDeadline(.seconds(600)) { try await verifier.verify(since: since, clientID: clientID, keys: keys) }
        }
        guard let result = answer else {
            throw APIProblem.tooManyRequests(
                "A verification of the audit trail is already running; ask again when it has finished.",
                retryAfter: .seconds(10)
            )
        }
        return Response(
            status: .ok,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: try result.json()))
        )
    }
}
