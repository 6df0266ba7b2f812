import Foundation

/// A request to revoke an Apple grant, as handed to ``RevocationQueue/enqueue(_:actor:)``.
public struct NewRevocation: Sendable, CustomStringConvertible {
    /// The app's Services ID / bundle id used as `client_id` with Apple.
    public var clientID: String
    /// The caller's reference (e.g. its user id); idempotency key together with `clientID`.
    public var externalReference: String
    /// Apple's user id (`sub`), when known; a mismatching id_token then stops the request.
    public var appleUserID: String?
    /// The credential to revoke.
    public var credential: Credential
    /// The redirect URI an authorization code was issued for, if any.
    public var redirectURI: String?
    /// Attempts before the request fails as `exhausted`.
    public var maxAttempts: Int

    /// Creates a new revocation.
    public init(
        clientID: String,
        externalReference: String,
        appleUserID: String? = nil,
        credential: Credential,
        redirectURI: String? = nil,
        maxAttempts: Int = 8
    ) {
        self.clientID = clientID
        self.externalReference = externalReference
        self.appleUserID = appleUserID
        self.credential = credential
        self.redirectURI = redirectURI
        self.maxAttempts = maxAttempts
    }

    public var description: String {
        "NewRevocation(clientID: \(self.clientID), externalReference: \(self.externalReference), kind: \(self.credential.kind))"
    }
}
