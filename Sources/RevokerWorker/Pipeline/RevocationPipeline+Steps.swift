import Foundation
import Logging
import RevokerProvider
import RevokerStore

/// The steps ``RevocationPipeline`` carries a request through, each ending it or handing on.
extension RevocationPipeline {
    /// What a step leaves: a token to revoke, or the request's end.
    enum Next {
        case revoke(String, GrantTokenKind)
        case ended(Disposition)
    }

    /// No configuration for the request's provider and client_id.
    func unconfigured(_ run: inout Run) async throws -> Disposition {
        run.logger.error(
            "A request names a provider and client_id this worker has no configuration for; it fails as client_misconfigured and can be requeued once the app is configured"
        )
        return try await finish(
            &run,
            .clientMisconfigured,
            error: ErrorDetail(code: "unknown_client_id", description: "no configuration for this provider and client_id")
        )
    }

    /// The account is gone, and every grant with it: nothing to call the provider about.
    func accountGone(_ provider: ProviderName, _ run: inout Run) async throws -> Disposition {
        let account =
            provider == .apple
            ? "Apple reported that the user deleted their Apple account" : "\(provider) reported that the user's account is gone"
        run.events.append(AuditEvent(.note, detail: account + "; no grant is left"))
        return try await finish(&run, .revokedByUser)
    }

    /// Books the first call's slot under the app's rate limits, before anything is recorded.
    /// Returns a disposition when the slot lies further ahead than a claim should wait.
    func bookFirstCall(_ run: inout Run) async throws -> Disposition? {
        let ticket = rateLimits.book(run.request.clientID)
        guard ticket.wait > OutboundRateLimits.longestWait else {
            run.ticket = ticket
            return nil
        }
        // Back to the queue until then, the attempt not counted, the worker free for other apps' requests.
        rateLimits.cancel(ticket, of: run.request.clientID)
        let wait = ticket.wait
        let why = "the app's outbound rate limit has no call slot for \(String(format: "%.1f", Double(wait.milliseconds) / 1000)) s"
        let lease = run.lease
        return try await store { try await queue.release(lease, after: wait, why: why) } ? .postponed(wait) : .leaseLost
    }

    /// A credential kind this worker cannot carry.
    func unsupportedCredential(_ run: inout Run) async throws -> Disposition {
        if let ticket = run.takeTicket() { rateLimits.cancel(ticket, of: run.request.clientID) }
        return try await finish(
            &run,
            .rejected,
            error: ErrorDetail(code: "unknown_credential_kind", description: "the credential kind is not supported")
        )
    }

    /// Proves the stored refresh (or access) token live and checks whose grant it is: a
    /// validation ends here, a hold keeps the token, a revoke hands it on.
    func prove(_ app: any ProviderApp, _ provider: ProviderName, _ kind: GrantTokenKind, _ run: inout Run) async throws -> Next {
        let token = run.claimed.credential.secret
        let proving = { () async throws -> GrantProof in
            if kind == .accessToken { return try await app.prove(accessToken: token) }
            return try await app.prove(refreshToken: token)
        }
        switch await call(provider, app.clientID, app.tokenEndpoint, ticket: run.takeTicket(), proving) {
        case .failure(let failure, let latency): return .ended(try await handle(failure, latency: latency, step: .validate, &run))
        case .success(let proof, let latency):
            run.events.append(AuditEvent(.tokenValidated, providerEndpoint: app.tokenEndpoint, httpStatus: 200, latency: latency))
            if case .unavailable(let failure) = proof.identity { return .ended(try await checkLater(failure, &run)) }
            // A token an earlier attempt's exchange brought to life is revoked if it is not kept.
            let issued = run.claimed.exchangeStartedBefore ? GrantProof(refreshToken: token, identity: proof.identity) : nil
            if let refused = try await checkIdentity(proof.identity, &run, issued: issued, app: app, provider: provider) { return .ended(refused) }
            // A periodic validation proves a held grant live and revokes nothing.
            if run.request.purpose == .validate { return .ended(try await finish(&run, .live)) }
            if run.request.purpose == .hold { return .ended(try await hold(&run, token: run.claimed.credential)) }
            return .revoke(token, kind)
        }
    }

    /// Holds an identity token that is itself the grant, verified when it was registered: no
    /// call to make, so the first call's slot goes back.
    func holdVerified(_ run: inout Run) async throws -> Disposition {
        if let ticket = run.takeTicket() { rateLimits.cancel(ticket, of: run.request.clientID) }
        run.verifiedSubject = run.request.userID
        return try await hold(&run, token: run.claimed.credential)
    }

    /// Revokes `token`; the provider's 200 ends the request as revoked.
    func revoke(
        _ token: String,
        _ kind: GrantTokenKind,
        _ app: any ProviderApp,
        _ provider: ProviderName,
        _ run: inout Run
    ) async throws -> Disposition {
        let endpoint = app.revokeEndpoint(for: kind)
        switch await call(provider, app.clientID, endpoint, ticket: run.takeTicket(), { try await app.revoke(token: token, kind: kind) }) {
        case .failure(let failure, let latency): return try await handle(failure, latency: latency, step: .revoke, &run)
        case .success(_, let latency):
            run.events.append(Self.revoked(kind, at: endpoint, latency: latency))
            return try await finish(&run, .revoked)
        }
    }
}
