import Foundation
import Hummingbird
import RevokerEvidence
import RevokerStore

/// A held grant as the API shows it: whose it is and where it stands, never its token.
public struct GrantView: ResponseEncodable {
    var id: String
    var provider: String
    var clientID: String
    var accountReference: String
    var userID: String?
    var userSource: String?
    var registeredKind: String
    var state: String
    var endReason: String?
    var errorCode: String?
    var errorDescription: String?
    var holdRequestID: String?
    var revokeRequestID: String?
    var createdAt: String
    var updatedAt: String
    var heldAt: String?
    var endedAt: String?
    var validatedAt: String?

    enum CodingKeys: String, CodingKey {
        case id, provider, state
        case clientID = "client_id"
        case accountReference = "account_reference"
        case userID = "user_id"
        case userSource = "user_source"
        case registeredKind = "registered_kind"
        case endReason = "end_reason"
        case errorCode = "error_code"
        case errorDescription = "error_description"
        case holdRequestID = "hold_request_id"
        case revokeRequestID = "revoke_request_id"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case heldAt = "held_at"
        case endedAt = "ended_at"
        case validatedAt = "validated_at"
    }

    public init(_ grant: Grant) {
        id = grant.id.uuidString.lowercased()
        provider = grant.provider
        clientID = grant.clientID
        accountReference = grant.accountReference
        userID = grant.userID
        userSource = grant.userSource?.rawValue
        registeredKind = grant.registeredKind.rawValue
        state = grant.state.rawValue
        endReason = grant.endReason
        errorCode = grant.error?.code
        errorDescription = grant.error?.description
        holdRequestID = grant.holdRequestID?.uuidString.lowercased()
        revokeRequestID = grant.revokeRequestID?.uuidString.lowercased()
        createdAt = WireFormat.timestamp(grant.createdAt)
        updatedAt = WireFormat.timestamp(grant.updatedAt)
        heldAt = grant.heldAt.map(WireFormat.timestamp)
        endedAt = grant.endedAt.map(WireFormat.timestamp)
        validatedAt = grant.validatedAt.map(WireFormat.timestamp)
    }

    /// Nil values are written as `null`, so every documented key is always present.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(provider, forKey: .provider)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(accountReference, forKey: .accountReference)
        try container.encode(userID, forKey: .userID)
        try container.encode(userSource, forKey: .userSource)
        try container.encode(registeredKind, forKey: .registeredKind)
        try container.encode(state, forKey: .state)
        try container.encode(endReason, forKey: .endReason)
        try container.encode(errorCode, forKey: .errorCode)
        try container.encode(errorDescription, forKey: .errorDescription)
        try container.encode(holdRequestID, forKey: .holdRequestID)
        try container.encode(revokeRequestID, forKey: .revokeRequestID)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(heldAt, forKey: .heldAt)
        try container.encode(endedAt, forKey: .endedAt)
        try container.encode(validatedAt, forKey: .validatedAt)
    }
}

/// `GET /v1/grants`.
struct GrantList: ResponseEncodable {
    var grants: [GrantView]
}
