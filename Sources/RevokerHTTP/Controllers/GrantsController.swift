import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RevokerProvider
import RevokerStore

/// `/v1/grants`: take a grant into custody at sign-in, and see where grants stand.
struct GrantsController {
    let queue: RevocationQueue
    let keys: APIKeys
    let rules: EnqueueRules
    let maxBodyBytes: Int
    let store: DatabaseDeadline
    /// How long registering a code waits for a worker to exchange it before answering 202.
    let exchangeWait: Duration
    let logger: Logger

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.post("grants") { request, context in try await register(request, context: context) }
        group.get("grants") { request, context in try await list(request, context: context) }
        group.get("grants/{id}") { request, context in try await show(request, context: context) }
    }

    /// The body of `POST /v1/grants` (`NewGrant` in the OpenAPI document), read in this order.
    struct RegisterBody: Decodable {
        var clientID: String
        var accountReference: String
        var authorizationCode: String?
        var refreshToken: String?
        var accessToken: String?
        var provider: String?
        var userID: String?
        var idToken: String?
        var redirectURI: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case clientID = "client_id"
            case accountReference = "account_reference"
            case authorizationCode = "authorization_code"
            case refreshToken = "refresh_token"
            case accessToken = "access_token"
            case provider
            case userID = "user_id"
            case idToken = "id_token"
            case redirectURI = "redirect_uri"
        }
    }

    func register(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<GrantView> {
        let caller = try keys.authorize(request, .grantsWrite)
        var context = context
        context.maxUploadSize = maxBodyBytes
        let body = try await request.decode(as: RegisterBody.self, context: context)
        let given = [
            (CredentialKind.authorizationCode, body.authorizationCode), (.refreshToken, body.refreshToken), (.accessToken, body.accessToken),
        ]
        let credentials = given.compactMap { kind, secret in secret.map { Credential(kind: kind, secret: $0) } }
        // A grant that is its identity token (a provider that issues no other token at sign-in)
        // comes as `id_token` alone.
        let identityGrant = credentials.isEmpty ? body.idToken.map { Credential(kind: .identityToken, secret: $0) } : nil
        guard let credential = identityGrant ?? (credentials.count == 1 ? credentials.first : nil) else {
            throw APIProblem.invalid(
                "Give exactly one of authorization_code, refresh_token, access_token (or, where the provider's grant is its identity token, id_token alone).",
                field: credentials.isEmpty ? "authorization_code" : credentials[1].kind.rawValue
            )
        }
        if body.userID != nil, body.idToken != nil {
            throw APIProblem.invalid("Name the user once: user_id or id_token.", field: "id_token")
        }
        let fields: [NewRevocation.Field: String] = [
            .credential: identityGrant == nil ? credential.kind.rawValue : "id_token", .externalReference: "account_reference",
            .userID: body.idToken != nil ? "id_token" : "user_id",
        ]
        let provider = body.provider ?? NewRevocation.defaultProvider
        var new: NewGrant
        do {
            new = try NewGrant(
                provider: provider,
                clientID: body.clientID,
                accountReference: body.accountReference,
                credential: credential,
                redirectURI: body.redirectURI,
                userID: body.userID
            )
            try rules.check(new)
            try caller.require(body.clientID)
            if let idToken = body.idToken {
                let subject = try await rules.verifiedSubject(of: idToken, provider: provider, clientID: body.clientID)
                new = try new.withUser(subject, fromIdentityToken: true)
            }
        } catch let refusal as EnqueueRules.Refusal {
            throw APIProblem(refusal, fields: fields, logger: logger)
        } catch let invalid as NewRevocation.Invalid {
            throw APIProblem(.invalid(invalid), fields: fields, logger: logger)
        }
        let traceParent = request.queueTraceParent
        let registration = try await store { [queue, new, logger = context.logger] in
            try await queue.custody.register(new, actor: "api:\(caller.name)", traceParent: traceParent, logger: logger)
        }
        var grant = registration.grant
        if grant.state == .pending {
            grant = try await withDeadline(exchangeWait + store.limit) { [queue, grant, exchangeWait, logger = context.logger] in
                try await queue.custody.settled(grant, within: exchangeWait, logger: logger)
            }
        }
        let created = if case .created = registration { true } else { false }
        let status: HTTPResponse.Status =
            switch grant.state {
            case .pending: .accepted
            case .failed: .unprocessableContent
            default: created ? .created : .ok
            }
        return EditedResponse(status: status, response: GrantView(grant))
    }

    func list(_ request: Request, context: APIRequestContext) async throws -> GrantList {
        let caller = try keys.authorize(request, .grantsRead)
        let query = try QueryInput(request, allowed: ["account_reference", "client_id", "limit"])
        guard let reference = try query.string("account_reference") else {
            throw APIProblem.badRequest("Name the account: account_reference.", field: "account_reference")
        }
        var clientIDs = caller.filter
        if let clientID = try query.string("client_id") {
            try caller.require(clientID)
            clientIDs = [clientID]
        }
        let limit = try query.integer("limit", range: 1...1000) ?? 100
        let grants = try await store { [queue, clientIDs, logger = context.logger] in
            try await queue.custody.grants(accountReference: reference, clientIDs: clientIDs, limit: limit, logger: logger)
        }
        return GrantList(grants: grants.map(GrantView.init))
    }

    func show(_ request: Request, context: APIRequestContext) async throws -> GrantView {
        let caller = try keys.authorize(request, .grantsRead)
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
            throw APIProblem.badRequest("The grant id must be a UUID.", field: "id")
        }
        guard let grant = try await store({ [queue, logger = context.logger] in try await queue.custody.grant(id: id, logger: logger) }),
            caller.reaches(grant.clientID)
        else { throw APIProblem.notFound("No grant with this id.") }
        return GrantView(grant)
    }
}
