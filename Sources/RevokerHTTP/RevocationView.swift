import Foundation
import Hummingbird
import RevokerEvidence
import RevokerStore

/// A revocation as the API shows it: everything but the credential.
struct RevocationView: ResponseEncodable {
    var id: String
    var provider: String
    var clientID: String
    var externalReference: String
    /// The user's id at the provider (`user_id`; also `apple_user_id` for Apple's requests).
    var userID: String?
    var credentialKind: String
    var enqueuedKind: String
    var hasCredential: Bool
    var redirectURI: String?
    var state: String
    var outcome: String?
    var attempts: Int
    var maxAttempts: Int
    var runAfter: String
    var lastErrorCode: String?
    var lastErrorDescription: String?
    var requeuedFrom: String?
    var createdAt: String
    var updatedAt: String
    var finishedAt: String?

    enum CodingKeys: String, CodingKey {
        case id, provider
        case userID = "user_id"
        case clientID = "client_id"
        case externalReference = "external_reference"
        case legacyAppleUserID = "apple_user_id"
        case credentialKind = "credential_kind"
        case enqueuedKind = "enqueued_kind"
        case hasCredential = "has_credential"
        case redirectURI = "redirect_uri"
        case state, outcome, attempts
        case maxAttempts = "max_attempts"
        case runAfter = "run_after"
        case lastErrorCode = "last_error_code"
        case lastErrorDescription = "last_error_description"
        case requeuedFrom = "requeued_from"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case finishedAt = "finished_at"
    }

    init(_ request: RevocationRequest) {
        id = request.id.uuidString.lowercased()
        provider = request.provider
        clientID = request.clientID
        externalReference = request.externalReference
        userID = request.userID
        credentialKind = request.credentialKind.rawValue
        enqueuedKind = request.enqueuedKind.rawValue
        hasCredential = request.hasCredential
        redirectURI = request.redirectURI
        state = request.state.rawValue
        outcome = request.outcome?.rawValue
        attempts = request.attempts
        maxAttempts = request.maxAttempts
        runAfter = WireFormat.timestamp(request.runAfter)
        lastErrorCode = request.lastErrorCode
        lastErrorDescription = request.lastErrorDescription
        requeuedFrom = request.requeuedFrom?.uuidString.lowercased()
        createdAt = WireFormat.timestamp(request.createdAt)
        updatedAt = WireFormat.timestamp(request.updatedAt)
        finishedAt = request.finishedAt.map(WireFormat.timestamp)
    }

    /// Nil values are written as `null`, so every documented key is always present.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(provider, forKey: .provider)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(externalReference, forKey: .externalReference)
        try container.encode(userID, forKey: .userID)
        // The older name, for Apple's requests only: its clients read it.
        try container.encode(provider == NewRevocation.defaultProvider ? userID : nil, forKey: .legacyAppleUserID)
        try container.encode(credentialKind, forKey: .credentialKind)
        try container.encode(enqueuedKind, forKey: .enqueuedKind)
        try container.encode(hasCredential, forKey: .hasCredential)
        try container.encode(redirectURI, forKey: .redirectURI)
        try container.encode(state, forKey: .state)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(attempts, forKey: .attempts)
        try container.encode(maxAttempts, forKey: .maxAttempts)
        try container.encode(runAfter, forKey: .runAfter)
        try container.encode(lastErrorCode, forKey: .lastErrorCode)
        try container.encode(lastErrorDescription, forKey: .lastErrorDescription)
        try container.encode(requeuedFrom, forKey: .requeuedFrom)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(finishedAt, forKey: .finishedAt)
    }
}

/// `GET /v1/revocations`.
struct RevocationList: ResponseEncodable {
    var revocations: [RevocationView]
}
