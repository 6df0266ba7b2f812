import Foundation

/// A grant to take into custody at sign-in, as handed to ``RevocationQueue/register(_:actor:logger:)``.
///
/// Built by the HTTP API and the command line; `revoker.register_grant` (migration 0014)
/// enforces the same rules for the SQL path.
public struct NewGrant: Sendable, CustomStringConvertible {
    /// The sign-in provider that issued the grant.
    public let provider: String
    /// The app's `client_id` at its provider.
    public let clientID: String
    /// The app's own reference for the account.
    public let accountReference: String
    /// An authorization code (exchanged at once), a refresh token, an access token, or an
    /// identity token that is itself the grant (its provider says which it takes).
    public let credential: Credential
    /// The redirect URI the code was issued for, if any.
    public let redirectURI: String?
    /// The user's id at the provider, when known.
    public let userID: String?
    /// Whether ``userID`` is the `sub` of an identity token Revoker verified.
    public let userFromIdentityToken: Bool

    /// Checks every rule (those of ``NewRevocation``; an identity token only with the user it
    /// verified to) and creates the value.
    ///
    /// - Throws: ``NewRevocation/Invalid`` naming the first field that breaks a rule; its
    ///   `externalReference` field is the account reference.
    public init(
        provider: String = NewRevocation.defaultProvider,
        clientID: String,
        accountReference: String,
        credential: Credential,
        redirectURI: String? = nil,
        userID: String? = nil,
        userFromIdentityToken: Bool = false
    ) throws(NewRevocation.Invalid) {
        if redirectURI != nil, credential.kind != .authorizationCode {
            throw NewRevocation.Invalid(.redirectURI, "belongs to an authorization code only")
        }
        // One set of rules: the revocation a grant may become.
        let checked = try NewRevocation(
            provider: provider,
            clientID: clientID,
            externalReference: accountReference,
            userID: userID,
            credential: credential,
            redirectURI: redirectURI
        )
        self.provider = checked.provider
        self.clientID = checked.clientID
        self.accountReference = checked.externalReference
        self.credential = credential
        self.redirectURI = redirectURI
        self.userID = userID
        self.userFromIdentityToken = userFromIdentityToken && userID != nil
    }

    /// The same grant for `userID`.
    public func withUser(_ userID: String?, fromIdentityToken: Bool) throws(NewRevocation.Invalid) -> NewGrant {
        try NewGrant(
            provider: provider,
            clientID: clientID,
            accountReference: accountReference,
            credential: credential,
            redirectURI: redirectURI,
            userID: userID,
            userFromIdentityToken: fromIdentityToken
        )
    }

    /// The `grant_registered` audit row's detail.
    func registeredDetail(grantID: UUID) -> String {
        let user = userID == nil ? "" : userFromIdentityToken ? " user=verified_id_token" : " user=stated"
        return "grant=\(grantID.uuidString.lowercased()) provider=\(provider) kind=\(credential.kind.rawValue)" + user
    }

    public var description: String {
        "NewGrant(provider: \(provider), clientID: \(clientID), accountReference: \(accountReference), kind: \(credential.kind))"
    }
}

/// What registering a grant did.
public enum GrantRegistration: Sendable, Hashable {
    /// A new grant: held at once (a refresh token), or pending while its code is exchanged.
    case created(Grant)
    /// The same code or token was registered before, for the same account: that grant.
    case existing(Grant)

    public var grant: Grant {
        switch self {
        case .created(let grant), .existing(let grant): grant
        }
    }
}
