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

/// `/v1/revocations`: enqueue, list, show, cancel and re-queue revocation requests.
struct RevocationsController {
    let queue: RevocationQueue
    let keys: APIKeys
    /// What is configured here: the apps a request may name, the providers that verify identity tokens.
    let rules: EnqueueRules
    let defaultMaxAttempts: Int
    let maxBodyBytes: Int
    let metrics: APIMetrics
    let store: DatabaseDeadline
    let logger: Logger

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.post("revocations") { request, context in try await enqueue(request, context: context) }
        group.get("revocations") { request, context in try await list(request, context: context) }
        group.get("revocations/{id}") { request, context in try await show(request, context: context) }
        group.post("revocations/{id}/cancel") { request, context in try await cancel(request, context: context) }
        group.post("revocations/{id}/requeue") { request, context in try await requeue(request, context: context) }
    }

    /// The body of `POST /v1/revocations` (`EnqueueRequest` in the OpenAPI document). Its fields
    /// are read in this order, so that of several faults the first one here is answered.
    struct EnqueueBody: Decodable {
        var clientID: String
        var externalReference: String
        var authorizationCode: String?
        var refreshToken: String?
        var accessToken: String?
        var provider: String?
        var userID: String?
        /// `apple_user_id`, the older name of `user_id`.
        var legacyUserID: String?
        var idToken: String?
        var redirectURI: String?
        var maxAttempts: Int?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientID = "client_id"
            case externalReference = "external_reference"
            case authorizationCode = "authorization_code"
            case refreshToken = "refresh_token"
            case accessToken = "access_token"
            case provider
            case userID = "user_id"
            case legacyUserID = "apple_user_id"
            case idToken = "id_token"
            case redirectURI = "redirect_uri"
            case maxAttempts = "max_attempts"
        }

        /// The credentials given; the API's field of each is its kind's name.
        var credentials: [Credential] {
            [(CredentialKind.authorizationCode, authorizationCode), (.refreshToken, refreshToken), (.accessToken, accessToken)].compactMap {
                kind,
                secret in secret.map { Credential(kind: kind, secret: $0) }
            }
        }
    }

    func enqueue(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<RevocationView> {
        let caller = try keys.authorize(request, .revocationsWrite)
        var context = context
        context.maxUploadSize = maxBodyBytes  // what the decoder reads at most
        let body = try await request.decode(as: EnqueueBody.self, context: context)
        let new = try await newRevocation(body, caller: caller)
        let traceParent = request.queueTraceParent
        let result = try await store { [queue, new, logger = context.logger] in
            try await queue.enqueue(new, actor: "api:\(caller.name)", traceParent: traceParent, logger: logger)
        }
        switch result {
        case .created(let created):
            metrics.enqueued()
            context.logger.debug("Enqueued over HTTP", metadata: ["revoker.request.id": "\(created.id)", "revoker.client_id": "\(body.clientID)"])
            return EditedResponse(status: .accepted, response: RevocationView(created))
        case .existing(let existing):
            return EditedResponse(status: .ok, response: RevocationView(existing))
        }
    }

    /// The request a body asks for, every rule checked (the app the caller may touch, the
    /// identity token verified); refusals name the body's field.
    func newRevocation(_ body: EnqueueBody, caller: APICaller) async throws -> NewRevocation {
        let credentials = body.credentials
        guard credentials.count == 1, let credential = credentials.first else {
            throw APIProblem.invalid(
                "Give exactly one of authorization_code, refresh_token, access_token.",
                field: credentials.isEmpty ? "authorization_code" : credentials[1].kind.rawValue
            )
        }
        if [body.userID, body.legacyUserID, body.idToken].compactMap({ $0 }).count > 1 {
            throw APIProblem.invalid(
                "Name the user once: user_id, apple_user_id (its older name) or id_token.",
                field: body.idToken != nil ? "id_token" : "apple_user_id"
            )
        }
        let userField = body.idToken != nil ? "id_token" : body.userID != nil ? "user_id" : "apple_user_id"
        var new: NewRevocation
        do {
            new = try NewRevocation(
                provider: body.provider ?? NewRevocation.defaultProvider,
                clientID: body.clientID,
                externalReference: body.externalReference,
                userID: body.userID ?? body.legacyUserID,
                credential: credential,
                redirectURI: body.redirectURI,
                maxAttempts: body.maxAttempts ?? defaultMaxAttempts
            )
            try rules.check(new)
            try caller.require(body.clientID)
            if let idToken = body.idToken { new = try await rules.binding(new, toIdentityToken: idToken) }
        } catch let refusal as EnqueueRules.Refusal {
            throw problem(refusal, credential: credential, userField: userField)
        } catch let invalid as NewRevocation.Invalid {
            throw problem(.invalid(invalid), credential: credential, userField: userField)
        }
        return new
    }

    /// A refusal of the enqueue rules, naming the field of this API.
    func problem(_ refusal: EnqueueRules.Refusal, credential: Credential, userField: String) -> APIProblem {
        APIProblem(refusal, fields: [.credential: credential.kind.rawValue, .userID: userField], logger: logger)
    }

    func list(_ request: Request, context: APIRequestContext) async throws -> RevocationList {
        let caller = try keys.authorize(request, .revocationsRead)
        let query = try QueryInput(
            request,
            allowed: ["provider", "client_id", "external_reference", "user_id", "apple_user_id", "state", "created_before", "limit"]
        )
        var state: RevocationState?
        if let name = query.values["state"] {
            guard let parsed = RevocationState(rawValue: name) else {
                throw APIProblem.badRequest("Unknown state; known: \(RevocationState.all.map(\.rawValue).joined(separator: ", ")).", field: "state")
            }
            state = parsed
        }
        let provider = try query.string("provider")
        if let provider, !NewRevocation.isProviderName(provider) {
            throw APIProblem.badRequest("A provider's name is 1 to 32 characters of a-z, 0-9 and _, starting with a letter.", field: "provider")
        }
        var filter = RevocationFilter(
            clientID: try query.string("client_id"),
            externalReference: try query.string("external_reference"),
            userID: try query.string("user_id") ?? query.string("apple_user_id"),
            state: state,
            createdBefore: try query.date("created_before"),
            limit: try query.integer("limit", range: 1...1000) ?? 100,
            provider: provider
        )
        if let clientID = filter.clientID { try caller.require(clientID) }
        filter.clientIDs = caller.filter
        let requests = try await store { [queue, filter, logger = context.logger] in try await queue.list(filter, logger: logger) }
        return RevocationList(revocations: requests.map(RevocationView.init))
    }

    func show(_ request: Request, context: APIRequestContext) async throws -> RevocationView {
        let caller = try keys.authorize(request, .revocationsRead)
        return RevocationView(try await reachableRequest(try APIResponse.id(context), caller))
    }

    func cancel(_ request: Request, context: APIRequestContext) async throws -> RevocationView {
        let caller = try keys.authorize(request, .revocationsWrite)
        let id = try APIResponse.id(context)
        if caller.clientIDs != nil { _ = try await reachableRequest(id, caller) }
        switch try await store({ [queue, logger = context.logger] in try await queue.cancel(id: id, actor: "api:\(caller.name)", logger: logger) }) {
        case .cancelled(let cancelled): return RevocationView(cancelled)
        case .notFound: throw APIProblem.notFound("No revocation with this id.")
        case .notCancellable(let existing):
            throw APIProblem.conflict("Only a pending revocation can be cancelled; this one is \(existing.state.rawValue).")
        }
    }

    func requeue(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<RevocationView> {
        let caller = try keys.authorize(request, .admin)
        let id = try APIResponse.id(context)
        if caller.clientIDs != nil { _ = try await reachableRequest(id, caller) }
        switch try await store({ [queue, logger = context.logger] in
            try await queue.requeueConfigurationFailure(id: id, actor: "api:\(caller.name)", logger: logger)
        }) {
        case .requeued(let requeued): return EditedResponse(status: .accepted, response: RevocationView(requeued))
        case .notFound: throw APIProblem.notFound("No revocation with this id.")
        case .notRequeueable(let existing):
            throw APIProblem.conflict(
                "Only a revocation that failed as client_misconfigured and still holds its credential can be re-queued; this one is \(existing.state.rawValue)\(existing.outcome.map { "/\($0.rawValue)" } ?? "")."
            )
        }
    }

    /// The request with this id, when it exists and the caller's key reaches its app; a request
    /// of another app is not found, so a key does not learn which ids exist elsewhere.
    func reachableRequest(_ id: UUID, _ caller: APICaller) async throws -> RevocationRequest {
        guard let found = try await store({ [queue] in try await queue.request(id: id) }), caller.reaches(found.clientID) else {
            throw APIProblem.notFound("No revocation with this id.")
        }
        return found
    }
}
