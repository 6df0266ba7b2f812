import Foundation
import Logging
import RevokerProvider
import RevokerStore

/// Whose grant it is, and what an attempt does with the tokens a code's exchange brought to life:
/// keeps them as the request's credential, revokes what is not kept, and waits when whose they
/// are cannot be checked yet.
extension RevocationPipeline {
    /// Acts on what the identity token said: when the request names a user, a grant of anyone
    /// else is refused, and what `issued` holds (tokens this request's own exchange brought to
    /// life) is revoked rather than dropped. Returns a disposition when the request ends here.
    func checkIdentity(
        _ identity: IdentityCheck,
        _ run: inout Run,
        issued: GrantProof?,
        app: any ProviderApp,
        provider: ProviderName
    ) async throws -> Disposition? {
        let request = run.request
        // A held grant is revoked with its account whoever its token turns out to name: its user
        // was only as sure as its registration, and a grant left alive outlives the account.
        let revokingHeldGrant = request.purpose == .revoke && request.grantID != nil
        let expected = revokingHeldGrant ? nil : request.userID
        let subject: String
        switch identity {
        case .absent where request.purpose == .hold, .unverifiable where request.purpose == .hold:
            // Taken in all the same (custody must not drop a live grant), its user left as
            // registered: unproven, so no message naming that user erases it unheard.
            run.events.append(AuditEvent(.note, detail: "the provider's answer proved no user; held with its user as registered (unproven)"))
            return nil
        case .absent:
            guard expected != nil else { return nil }
            if let retry = try await discard(issued, app, provider, &run, why: "no identity token to check the user") { return retry }
            return try await finish(
                &run,
                .rejected,
                error: ErrorDetail(code: "id_token_missing", description: "the provider sent no identity token to check the user against")
            )
        case .unverifiable(let code):
            return try await unchecked(code, &run, expected: expected, issued: issued, app: app, provider: provider)
        case .unavailable(let failure):
            // Only an access token came with it (a refresh token is proved again later): as one
            // that did not verify.
            return try await unchecked(failure.error ?? "keys_unavailable", &run, expected: expected, issued: issued, app: app, provider: provider)
        case .verified(let verified):
            subject = verified
            run.verifiedSubject = verified
        }
        if revokingHeldGrant, let stated = request.userID, subject != stated {
            run.events.append(
                AuditEvent(.note, detail: "the held grant's token names another user than it was registered under; revoked with its account")
            )
        }
        if let expected, subject != expected {
            run.events.append(AuditEvent(.idTokenMismatch, detail: "the grant belongs to another user than the request names"))
            run.logger.warning("The grant belongs to another user than the request names; not revoking it as theirs")
            if let retry = try await discard(issued, app, provider, &run, why: "it is another user's grant") { return retry }
            return try await finish(
                &run,
                .subjectMismatch,
                error: ErrorDetail(code: "subject_mismatch", description: "the identity token's sub differs from the request's user id")
            )
        }
        run.events.append(AuditEvent(.idTokenVerified, detail: expected == nil ? "sub not compared (none given)" : "sub matches"))
        return nil
    }

    /// An identity token that could not be checked: refused when the request names a user (and
    /// what the exchange issued revoked), else noted and passed.
    private func unchecked(
        _ code: String,
        _ run: inout Run,
        expected: String?,
        issued: GrantProof?,
        app: any ProviderApp,
        provider: ProviderName
    ) async throws -> Disposition? {
        guard expected != nil else {
            run.events.append(AuditEvent(.note, detail: "identity token not verified (\(code)); no user id to check"))
            return nil
        }
        if let retry = try await discard(issued, app, provider, &run, why: "its identity token did not verify") { return retry }
        return try await finish(&run, .rejected, error: ErrorDetail(code: code, description: "the identity token could not be verified"))
    }

    /// Revokes what this request's own exchange brought to life and Revoker does not keep (a grant
    /// of another user, or one without a refresh token to hold): dropped, it would be a live grant
    /// nobody can revoke. Returns a disposition when the request cannot end yet (the revoke is retried).
    func discard(
        _ issued: GrantProof?,
        _ app: any ProviderApp,
        _ provider: ProviderName,
        _ run: inout Run,
        why: String
    ) async throws -> Disposition? {
        let token: String
        let kind: GrantTokenKind
        if let refreshToken = issued?.refreshToken {
            (token, kind) = (refreshToken, .refreshToken)
        } else if let accessToken = issued?.accessToken {
            (token, kind) = (accessToken, .accessToken)
        } else {
            return nil
        }
        switch await call(provider, app.clientID, app.revokeEndpoint, ticket: run.takeTicket(), { try await app.revoke(token: token, kind: kind) }) {
        case .success(_, let latency):
            run.events.append(
                Self.revoked(kind, at: app.revokeEndpoint, latency: latency, why: "issued by this request's exchange and not kept: \(why)")
            )
            return nil
        case .failure(let failure, let latency) where failure.classification == .credentialRejected || failure.classification == .requestRejected:
            // Already dead, or refused for good: nothing a retry would change.
            run.events.append(Self.providerError(failure, latency: latency))
            return nil
        case .failure(let failure, let latency):
            if kind == .refreshToken, run.claimed.credential.kind == .authorizationCode {
                // Kept as the request's credential, so that the next attempt revokes it.
                if let lost = try await keep(token, app, &run) { return lost }
            }
            return try await handle(failure, latency: latency, step: .revoke, &run)
        }
    }

    /// Seals the refresh token this attempt's exchange brought to life as the request's credential,
    /// with the events so far, so that no retry re-sends the spent code. Nil once kept; when the
    /// lease was lost meanwhile, the other worker holds only the spent code, so the token is revoked
    /// here and the answer is `.leaseLost`.
    func keep(_ refreshToken: String, _ app: any ProviderApp, _ run: inout Run) async throws -> Disposition? {
        let (lease, events) = (run.lease, run.events)
        let stored = try await store {
            try await queue.replaceCredential(lease, with: Credential(kind: .refreshToken, secret: refreshToken), events: events)
        }
        run.events = []
        guard !stored else { return nil }
        _ = try? await app.revoke(token: refreshToken, kind: .refreshToken)
        run.logger.warning("Lease lost after exchanging a code; revoked the new refresh token without recording it")
        return .leaseLost
    }

    /// Whose grant it is could not be checked (the provider's keys could not be had, or do not
    /// list the identity token's key yet): the request waits and asks again, its attempt not
    /// counted, since a live grant must never end on the provider's own inconsistency.
    func checkLater(_ failure: ProviderFailure, _ run: inout Run) async throws -> Disposition {
        run.events.append(Self.providerError(failure, latency: nil))
        let backoff = max(failure.retryAfter ?? .zero, retryPolicy.delay(afterAttempt: run.request.attempts, retryAfter: nil))
        let delay = run.request.purpose == .hold ? min(backoff, Self.longestHoldRetry) : backoff
        let error = ErrorDetail(code: failure.error ?? "keys_unavailable", description: failure.detail)
        let (lease, events) = (run.lease, run.events)
        guard try await store({ try await queue.retry(lease, after: delay, error: error, countsAttempt: false, events: events) }) else {
            return .leaseLost
        }
        run.events = []
        return .retryScheduled(delay)
    }

    /// The `revoked` row of a revoke the provider answered 200.
    static func revoked(_ kind: GrantTokenKind, at endpoint: String, latency: Duration, why: String? = nil) -> AuditEvent {
        AuditEvent(
            .revoked,
            providerEndpoint: endpoint,
            httpStatus: 200,
            latency: latency,
            detail: "token_type_hint=\(kind.rawValue)" + (why.map { "; " + $0 } ?? "")
        )
    }

    static func providerError(_ failure: ProviderFailure, latency: Duration?) -> AuditEvent {
        AuditEvent(
            .providerError,
            providerEndpoint: failure.endpoint,
            httpStatus: failure.httpStatus,
            providerError: failure.error,
            providerErrorDescription: failure.errorDescription,
            latency: latency,
            detail: failure.detail
        )
    }
}
