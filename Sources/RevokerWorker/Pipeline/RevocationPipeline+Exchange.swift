import Foundation
import Logging
import RevokerProvider
import RevokerStore

/// A code's exchange, whose grant it is, and what an attempt does with the tokens an exchange
/// brought to life: keeps them as the request's credential, revokes what is not kept, and waits
/// when whose they are cannot be checked yet.
extension RevocationPipeline {
    /// Exchanges the code (recorded as started first), checks whose grant it is and keeps the
    /// refresh token it yields before anything else: a hold ends here, a revoke hands a token on.
    func exchange(_ app: any ProviderApp, _ provider: ProviderName, _ run: inout Run) async throws -> Next {
        let code = run.claimed.credential.secret
        // Recorded before the call: should this attempt die before the refresh token is
        // stored, the next one knows that a refusal of the code may be our own doing.
        let (lease, started) = (run.lease, run.events + [AuditEvent(.exchangeStarted, providerEndpoint: app.tokenEndpoint)])
        guard try await store({ try await queue.record(lease, events: started) }) else { return .ended(.leaseLost) }
        run.events = []
        let proof: GrantProof
        switch await call(
            provider,
            app.clientID,
            app.tokenEndpoint,
            ticket: run.takeTicket(),
            { [redirectURI = run.request.redirectURI] in try await app.exchange(code: code, redirectURI: redirectURI) }
        ) {
        case .failure(let failure, let latency): return .ended(try await handle(failure, latency: latency, step: .exchange, &run))
        case .success(let answer, let latency):
            proof = answer
            run.events.append(AuditEvent(.tokenExchanged, providerEndpoint: app.tokenEndpoint, httpStatus: 200, latency: latency))
        }
        if case .unavailable(let failure) = proof.identity, let refreshToken = proof.refreshToken {
            // Whose grant it is cannot be checked yet: the next attempt proves the refresh token
            // for a fresh identity token.
            run.events.append(
                AuditEvent(.note, detail: "identity token not checked yet (\(failure.error ?? "keys_unavailable")); the refresh token is proved next")
            )
            if let lost = try await keep(refreshToken, app, &run) { return .ended(lost) }
            return .ended(try await checkLater(failure, &run))
        }
        if let refused = try await checkIdentity(proof.identity, &run, issued: proof, app: app, provider: provider) { return .ended(refused) }
        if run.request.purpose == .hold { return .ended(try await holdExchanged(proof, app, provider, &run)) }
        if let refreshToken = proof.refreshToken {
            // Stored before the revoke: a retry must never re-send the spent code.
            if let lost = try await keep(refreshToken, app, &run) { return .ended(lost) }
            return .revoke(refreshToken, .refreshToken)
        }
        if let accessToken = proof.accessToken { return .revoke(accessToken, .accessToken) }
        return .ended(
            try await finish(
                &run,
                .rejected,
                error: ErrorDetail(code: "no_token_issued", description: "the exchange returned neither a refresh nor an access token")
            )
        )
    }

    /// Ends a hold with the refresh token its exchange yielded; without one, what the exchange
    /// issued is revoked and the hold refused.
    private func holdExchanged(_ proof: GrantProof, _ app: any ProviderApp, _ provider: ProviderName, _ run: inout Run) async throws -> Disposition {
        guard let refreshToken = proof.refreshToken else {
            if let retry = try await discard(proof, app, provider, &run, why: "no refresh token to hold") { return retry }
            return try await finish(
                &run,
                .rejected,
                error: ErrorDetail(
                    code: "no_refresh_token",
                    description: "the exchange returned no refresh token to hold (Google: ask for offline access)"
                )
            )
        }
        return try await hold(&run, token: Credential(kind: .refreshToken, secret: refreshToken))
    }

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
    /// here and the answer is `.leaseLost`. So it is when the database cannot take it (a failover):
    /// the next attempt would find only the spent code, and the grant would outlive the request.
    func keep(_ refreshToken: String, _ app: any ProviderApp, _ run: inout Run) async throws -> Disposition? {
        let (lease, events) = (run.lease, run.events)
        let stored: Bool
        do {
            stored = try await store {
                try await queue.replaceCredential(lease, with: Credential(kind: .refreshToken, secret: refreshToken), events: events)
            }
        } catch {
            _ = try? await app.revoke(token: refreshToken, kind: .refreshToken)
            run.logger.warning("Could not store the refresh token an exchange returned; revoked it without recording it")
            throw error
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
