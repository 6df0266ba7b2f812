import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RevokerEvidence
import RevokerStore

/// `/v1/erasures/{code}`: a person's request, through their provider, that the app delete their
/// data. The backend learns the code from the provider's event (`data.erasure_code`), deletes
/// what it holds, and records the decision the person reads on the status page: `deleted`, or
/// `refused` with a justification.
struct ErasuresController {
    let erasures: ErasureRequests
    let keys: APIKeys
    let maxBodyBytes: Int
    let store: DatabaseDeadline
    let statusURL: @Sendable (_ code: String, _ request: Request) -> String

    func addRoutes(to group: RouterGroup<APIRequestContext>) {
        group.get("erasures/{code}") { request, context in try await show(request, context: context) }
        group.post("erasures/{code}/decision") { request, context in try await decide(request, context: context) }
    }

    /// The body of `POST /v1/erasures/{code}/decision` (`ErasureDecision`).
    struct DecisionBody: Decodable {
        var state: String
        var justification: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case state, justification
        }
    }

    func show(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<ErasureView> {
        let caller = try keys.authorize(request, .revocationsRead)
        let code = context.parameters.get("code") ?? ""
        guard let erasure = try await store({ [erasures, logger = context.logger] in try await erasures.request(code: code, logger: logger) }),
            caller.reaches(erasure.clientID)
        else { throw APIProblem.notFound("No erasure request with this code.") }
        return EditedResponse(status: .ok, response: ErasureView(erasure, statusURL: statusURL(erasure.code, request)))
    }

    func decide(_ request: Request, context: APIRequestContext) async throws -> EditedResponse<ErasureView> {
        let caller = try keys.authorize(request, .revocationsWrite)
        var context = context
        context.maxUploadSize = maxBodyBytes
        let body = try await request.decode(as: DecisionBody.self, context: context)
        let state: ErasureRequest.State
        switch body.state {
        case "deleted":
            guard body.justification == nil else {
                throw APIProblem.invalid("A justification goes with a refusal only.", field: "justification")
            }
            state = .deleted
        case "refused":
            if let problem = ErasureRequests.justificationProblem(body.justification ?? "") {
                throw APIProblem.invalid("A refusal needs \(problem).", field: "justification")
            }
            state = .refused
        default:
            throw APIProblem.invalid("The state must be deleted or refused.", field: "state")
        }
        let code = context.parameters.get("code") ?? ""
        let filter = caller.filter.map(Set.init)
        let decision = try await store { [erasures, justification = body.justification, logger = context.logger] in
            try await erasures.decide(code: code, state, justification: justification, clientIDs: filter, actor: "api:\(caller.name)", logger: logger)
        }
        switch decision {
        case .recorded(let erasure), .unchanged(let erasure):
            return EditedResponse(status: .ok, response: ErasureView(erasure, statusURL: statusURL(erasure.code, request)))
        case .conflicting(let erasure):
            throw APIProblem.conflict("This request was already decided (\(erasure.state.rawValue)); a decision stands once made.")
        case .notFound: throw APIProblem.notFound("No erasure request with this code.")
        }
    }
}

/// An erasure request as the API shows it.
struct ErasureView: ResponseEncodable {
    var code: String
    var provider: String
    var clientID: String
    var userID: String
    var receivedAt: String
    var grantsEnded: Int
    var state: String
    var justification: String?
    var decidedAt: String?
    var statusURL: String

    enum CodingKeys: String, CodingKey {
        case code, provider, state, justification
        case clientID = "client_id"
        case userID = "user_id"
        case receivedAt = "received_at"
        case grantsEnded = "grants_ended"
        case decidedAt = "decided_at"
        case statusURL = "status_url"
    }

    init(_ erasure: ErasureRequest, statusURL: String) {
        code = erasure.code
        provider = erasure.provider
        clientID = erasure.clientID
        userID = erasure.userID
        receivedAt = WireFormat.timestamp(erasure.receivedAt)
        grantsEnded = erasure.grantsEnded
        state = erasure.state.rawValue
        justification = erasure.justification
        decidedAt = erasure.decidedAt.map(WireFormat.timestamp)
        self.statusURL = statusURL
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(provider, forKey: .provider)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(userID, forKey: .userID)
        try container.encode(receivedAt, forKey: .receivedAt)
        try container.encode(grantsEnded, forKey: .grantsEnded)
        try container.encode(state, forKey: .state)
        try container.encode(justification, forKey: .justification)
        try container.encode(decidedAt, forKey: .decidedAt)
        try container.encode(statusURL, forKey: .statusURL)
    }
}
