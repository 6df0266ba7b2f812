import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RevokerStore

/// `/v1/accounts/{reference}/deletion` and `/v1/deletions`: delete an account by its reference
/// alone, and see what became of its grants.
struct DeletionsController {
    let queue: RevocationQueue
    let keys: APIKeys
    /// Reads a deletion's credential as `POST /v1/revocations` reads a request.
    let revocations: RevocationsController
    let maxBodyBytes: Int
    let store: DatabaseDeadline
    let logger: Logger

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.post("accounts/{reference}/deletion") { request, context in try await delete(request, context: context) }
        group.get("accounts/{reference}/deletions") { request, context in try await list(request, context: context) }
        group.get("deletions/{id}") { request, context in try await show(request, context: context) }
    }

    /// The body of `POST /v1/accounts/{reference}/deletion` (`NewDeletion`), which may be empty.
    struct DeletionBody: Decodable {
        var clientIDs: [String]?
        var credential: CredentialBody?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientIDs = "client_ids"
            case credential
        }
    }

    /// A grant Revoker never saw, as `POST /v1/revocations` takes one, without its reference
    /// (the account's).
    struct CredentialBody: Decodable {
        var clientID: String
        var authorizationCode: String?
        var refreshToken: String?
        var accessToken: String?
        var provider: String?
        var userID: String?
        var idToken: String?
        var redirectURI: String?
        var maxAttempts: Int?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientID = "client_id"
            case authorizationCode = "authorization_code"
            case refreshToken = "refresh_token"
            case accessToken = "access_token"
            case provider
            case userID = "user_id"
            case idToken = "id_token"
            case redirectURI = "redirect_uri"
            case maxAttempts = "max_attempts"
        }

        func enqueueBody(reference: String) -> RevocationsController.EnqueueBody {
            .init(
                clientID: clientID,
                externalReference: reference,
                authorizationCode: authorizationCode,
                refreshToken: refreshToken,
                accessToken: accessToken,
                provider: provider,
                userID: userID,
                idToken: idToken,
                redirectURI: redirectURI,
                maxAttempts: maxAttempts
            )
        }
    }

    func delete(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<DeletionView> {
        let caller = try keys.authorize(request, .revocationsWrite)
        let reference = try Self.reference(context)
        var context = context
        context.maxUploadSize = maxBodyBytes
        let body =
            request.headers[.contentType] == nil && (request.headers[.contentLength] ?? "0") == "0"
            ? DeletionBody() : try await request.decode(as: DeletionBody.self, context: context)
        var scope = caller.filter
        if let asked = body.clientIDs {
            guard (1...100).contains(asked.count) else {
                throw APIProblem.invalid("client_ids must list 1 to 100 apps.", field: "client_ids")
            }
            let served = revocations.rules.served.values.reduce(into: Set<String>()) { $0.formUnion($1) }
            if let unknown = asked.first(where: { !served.contains($0) }) {
                throw APIProblem.invalid(
                    "client_ids must name apps Revoker is configured for; \(unknown.debugDescription) is not one.",
                    field: "client_ids"
                )
            }
            for clientID in asked { try caller.require(clientID) }
            scope = Array(Set(asked)).sorted()
        }
        var credential: NewRevocation?
        if let given = body.credential {
            credential = try await revocations.newRevocation(given.enqueueBody(reference: reference), caller: caller)
        }
        if let credential, let scope, !scope.contains(credential.clientID) {
            throw APIProblem.invalid("The credential's client_id must be among client_ids.", field: "client_id")
        }
        let traceParent = request.queueTraceParent
        let result = try await store { [queue, scope, credential, logger = context.logger] in
            try await queue.deletions.request(
                accountReference: reference,
                clientIDs: scope,
                credential: credential,
                actor: "api:\(caller.name)",
                traceParent: traceParent,
                logger: logger
            )
        }
        let status: HTTPResponse.Status =
            switch result {
            case .created(let deletion): deletion.state == .completed ? .created : .accepted
            case .existing: .ok
            }
        var view = result.deletion
        view.grants = view.grants.filter { caller.reaches($0.clientID) }
        view.requests = view.requests.filter { caller.reaches($0.clientID) }
        return EditedResponse(status: status, response: DeletionView(view))
    }

    func list(_ request: Request, context: APIRequestContext) async throws -> DeletionList {
        let caller = try keys.authorize(request, .revocationsRead)
        let reference = try Self.reference(context)
        let query = try QueryInput(request, allowed: ["limit"])
        let limit = try query.integer("limit", range: 1...1000) ?? 100
        let deletions = try await store { [queue, filter = caller.filter, logger = context.logger] in
            try await queue.deletions.ofAccount(reference, clientIDs: filter, limit: limit, logger: logger)
        }
        return DeletionList(deletions: deletions.map(DeletionView.init))
    }

    func show(_ request: Request, context: APIRequestContext) async throws -> DeletionView {
        let caller = try keys.authorize(request, .revocationsRead)
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
            throw APIProblem.badRequest("The deletion id must be a UUID.", field: "id")
        }
        guard
            let deletion = try await store({ [queue, filter = caller.filter, logger = context.logger] in
                try await queue.deletions.deletion(id: id, clientIDs: filter, logger: logger)
            })
        else { throw APIProblem.notFound("No deletion with this id.") }
        return DeletionView(deletion)
    }

    /// The account reference of the path, percent-decoded (a reference may hold a `/` as `%2F`),
    /// under the rules of every reference.
    static func reference(_ context: APIRequestContext) throws -> String {
        guard let raw = context.parameters.get("reference"), let reference = raw.removingPercentEncoding else {
            throw APIProblem.badRequest("The account reference in the path is not valid percent-encoding.", field: "reference")
        }
        guard (1...255).contains(reference.unicodeScalars.count), NewRevocation.isVisibleText(reference) else {
            throw APIProblem.badRequest(
                "The account reference must be 1 to 255 characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space.",
                field: "reference"
            )
        }
        return reference
    }
}
