import HTTPTypes
import Logging
import RevokerProvider
import RevokerStore

extension APIProblem {
    /// A refusal of the enqueue rules (also a grant's registration), naming the field as this
    /// API calls it: `fields` renames those whose name differs from ``NewRevocation/Field``'s.
    init(_ refusal: EnqueueRules.Refusal, fields: [NewRevocation.Field: String], logger: Logger) {
        switch refusal {
        case .invalid(let invalid):
            self = .invalid("This field \(invalid.rule).", field: fields[invalid.field] ?? invalid.field.rawValue)
        case .unknownProvider(let configured):
            self = .invalid("No such provider is configured; configured: \(configured.joined(separator: ", ")).", field: "provider")
        case .unknownApp:
            self = .invalid("No app with this client_id is configured for this provider.", field: "client_id")
        case .unsupportedCredential(let accepted):
            self = .invalid(
                "This provider's grants come as \(accepted.joined(separator: " or ")) only.",
                field: fields[.credential] ?? NewRevocation.Field.credential.rawValue
            )
        case .unverifiableIdentityToken:
            self = .invalid(
                "This field must be an identity token of at most \(EnqueueRules.maximumIdentityTokenBytes) bytes from the request's provider.",
                field: "id_token"
            )
        case .identityTokenRejected(let rejected):
            self = .invalid("The identity token did not verify (\(rejected.code)): \(rejected.reason)", field: "id_token")
        case .keysUnavailable(let failure):
            logger.warning("The provider's keys could not be fetched to verify an identity token", metadata: ["provider.detail": "\(failure.detail)"])
            self = APIProblem(.serviceUnavailable, "The provider's keys could not be fetched to verify the identity token; try again.")
            self.headers[.retryAfter] = "5"
        }
    }
}
