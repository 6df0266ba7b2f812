import Foundation
import Hummingbird
import RevokerEvidence
import RevokerStore

/// An account deletion as the API shows it: what it covers and what became of each grant.
public struct DeletionView: ResponseEncodable {
    var id: String
    var accountReference: String
    var clientIDs: [String]?
    var state: String
    var outcome: String?
    var requestedBy: String
    var requestedAt: String
    var completedAt: String?
    var grants: [GrantFate]
    var requests: [RequestFate]

    /// One grant the deletion covers.
    struct GrantFate: Encodable {
        var grantID: String
        var provider: String
        var clientID: String
        var userID: String?
        var state: String
        var outcome: String?
        var requestID: String?

        enum CodingKeys: String, CodingKey {
            case provider, state, outcome
            case grantID = "grant_id"
            case clientID = "client_id"
            case userID = "user_id"
            case requestID = "request_id"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(grantID, forKey: .grantID)
            try container.encode(provider, forKey: .provider)
            try container.encode(clientID, forKey: .clientID)
            try container.encode(userID, forKey: .userID)
            try container.encode(state, forKey: .state)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(requestID, forKey: .requestID)
        }
    }

    /// One of the deletion's requests: a grant's revocation, or the credential it carried.
    struct RequestFate: Encodable {
        var id: String
        var provider: String
        var clientID: String
        var grantID: String?
        var state: String
        var outcome: String?
        var errorCode: String?

        enum CodingKeys: String, CodingKey {
            case id, provider, state, outcome
            case clientID = "client_id"
            case grantID = "grant_id"
            case errorCode = "error_code"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(provider, forKey: .provider)
            try container.encode(clientID, forKey: .clientID)
            try container.encode(grantID, forKey: .grantID)
            try container.encode(state, forKey: .state)
            try container.encode(outcome, forKey: .outcome)
            try container.encode(errorCode, forKey: .errorCode)
        }
    }

    enum CodingKeys: String, CodingKey {
        case id, state, outcome, grants, requests
        case accountReference = "account_reference"
        case clientIDs = "client_ids"
        case requestedBy = "requested_by"
        case requestedAt = "requested_at"
        case completedAt = "completed_at"
    }

    public init(_ deletion: AccountDeletion) {
        id = deletion.id.uuidString.lowercased()
        accountReference = deletion.accountReference
        clientIDs = deletion.clientIDs
        state = deletion.state.rawValue
        outcome = deletion.outcome?.rawValue
        requestedBy = deletion.requestedBy
        requestedAt = WireFormat.timestamp(deletion.requestedAt)
        completedAt = deletion.completedAt.map(WireFormat.timestamp)
        grants = zip(deletion.grants, deletion.grantOutcomes).map { grant, outcome in
            GrantFate(
                grantID: grant.id.uuidString.lowercased(),
                provider: grant.provider,
                clientID: grant.clientID,
                userID: grant.userID,
                state: grant.state.rawValue,
                outcome: outcome,
                requestID: grant.revokeRequestID?.uuidString.lowercased()
            )
        }
        requests = deletion.requests.map { request in
            RequestFate(
                id: request.id.uuidString.lowercased(),
                provider: request.provider,
                clientID: request.clientID,
                grantID: request.grantID?.uuidString.lowercased(),
                state: request.state.rawValue,
                outcome: request.outcome?.rawValue,
                errorCode: request.lastErrorCode
            )
        }
    }

    /// Nil values are written as `null`, so every documented key is always present.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(accountReference, forKey: .accountReference)
        try container.encode(clientIDs, forKey: .clientIDs)
        try container.encode(state, forKey: .state)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(requestedBy, forKey: .requestedBy)
        try container.encode(requestedAt, forKey: .requestedAt)
        try container.encode(completedAt, forKey: .completedAt)
        try container.encode(grants, forKey: .grants)
        try container.encode(requests, forKey: .requests)
    }
}

/// `GET /v1/accounts/{reference}/deletions`.
struct DeletionList: ResponseEncodable {
    var deletions: [DeletionView]
}
