import RevokerProvider

/// The rules of enqueueing beyond a request's own (``NewRevocation``), for every way in (the
/// HTTP API, the command line): the provider and the app are configured here, and an identity
/// token names the user only once its provider verified it completely. Each edge phrases the
/// ``Refusal`` in its own words (a field, a flag).
public struct EnqueueRules: Sendable {
    /// The client_ids each provider serves; a provider without apps is not served.
    public let served: [String: Set<String>]
    /// Verify the identity tokens a request may carry instead of a user id.
    public let providers: SignInProviders

    /// The largest identity token accepted, in bytes.
    public static let maximumIdentityTokenBytes = 16_384

    public init(served: [String: Set<String>], providers: SignInProviders) {
        self.served = served
        self.providers = providers
    }

    /// Why a request is not enqueued.
    public enum Refusal: Error, Sendable {
        /// A field breaks one of ``NewRevocation``'s rules.
        case invalid(NewRevocation.Invalid)
        /// The request names a provider not served here; `configured` are those that are.
        case unknownProvider(configured: [String])
        /// The provider serves no app with the request's client_id; `configured` are its apps.
        case unknownApp(configured: [String])
        /// The provider's grants do not come as this kind of credential; `accepted` are the kinds
        /// they come as.
        case unsupportedCredential(accepted: [String])
        /// The identity token is larger than ``maximumIdentityTokenBytes``, or its provider
        /// cannot verify tokens here.
        case unverifiableIdentityToken
        /// The identity token did not verify.
        case identityTokenRejected(IdentityTokenRejected)
        /// The provider's keys could not be fetched: try again.
        case keysUnavailable(ProviderFailure)
    }

    /// `new` checked against what is configured here.
    public func check(_ new: NewRevocation) throws(Refusal) {
        try check(provider: new.provider, clientID: new.clientID)
        try check(new.credential.kind, among: ProviderName(rawValue: new.provider).flatMap { providers[$0]?.credentialKinds })
    }

    /// `new` checked against what is configured here.
    public func check(_ new: NewGrant) throws(Refusal) {
        try check(provider: new.provider, clientID: new.clientID)
        try check(new.credential.kind, among: ProviderName(rawValue: new.provider).flatMap { providers[$0]?.grantKinds })
    }

    private func check(_ kind: CredentialKind, among accepted: Set<String>?) throws(Refusal) {
        guard let accepted, !accepted.contains(kind.rawValue) else { return }
        throw .unsupportedCredential(accepted: CredentialKind.all.map(\.rawValue).filter(accepted.contains))
    }

    /// Whether `provider` is served here and has an app with `clientID`.
    public func check(provider: String, clientID: String) throws(Refusal) {
        guard let apps = served[provider] else { throw .unknownProvider(configured: served.keys.sorted()) }
        guard apps.contains(clientID) else { throw .unknownApp(configured: apps.sorted()) }
    }

    /// The request checked, its user the verified `sub` of `identityToken`, an identity token the
    /// app received when the user signed in.
    public func binding(_ new: NewRevocation, toIdentityToken identityToken: String) async throws(Refusal) -> NewRevocation {
        let subject = try await verifiedSubject(of: identityToken, provider: new.provider, clientID: new.clientID)
        do {
            return try new.withUser(subject, fromIdentityToken: true)
        } catch {
            throw .invalid(error)
        }
    }

    /// The `sub` of `identityToken`, an identity token app `clientID` of `provider` received when
    /// the user signed in, once verified completely.
    public func verifiedSubject(of identityToken: String, provider: String, clientID: String) async throws(Refusal) -> String {
        try check(provider: provider, clientID: clientID)
        guard identityToken.utf8.count <= Self.maximumIdentityTokenBytes, let name = ProviderName(rawValue: provider),
            let provider = providers[name]
        else { throw .unverifiableIdentityToken }
        do {
            return try await provider.verifyIdentityToken(identityToken, clientID: clientID)
        } catch let rejected as IdentityTokenRejected {
            throw .identityTokenRejected(rejected)
        } catch let failure as ProviderFailure {
            throw .keysUnavailable(failure)
        } catch {
            throw .keysUnavailable(
                ProviderFailure(endpoint: "identity token", classification: .transient, httpStatus: nil, detail: "\(type(of: error))")
            )
        }
    }
}

extension NewRevocation {
    /// The same request for `userID`.
    public func withUser(_ userID: String?, fromIdentityToken: Bool) throws(Invalid) -> NewRevocation {
        try NewRevocation(
            provider: provider,
            clientID: clientID,
            externalReference: externalReference,
            userID: userID,
            userFromIdentityToken: fromIdentityToken,
            credential: credential,
            redirectURI: redirectURI,
            maxAttempts: maxAttempts
        )
    }
}
