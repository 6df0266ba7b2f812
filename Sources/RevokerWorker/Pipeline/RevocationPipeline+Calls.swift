import Foundation
import Logging
import RevokerProvider
import RevokerStore

/// How the pipeline calls out: the database under its deadline, the provider timed and metered.
extension RevocationPipeline {
    /// Runs a database call under the pipeline's time limit, timed into
    /// `revoker_database_call_duration_seconds{caller="worker"}`.
    func store<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        do {
            let value = try await withDeadline(databaseTimeout, body)
            metrics.databaseCall(succeeded: true, duration: ContinuousClock.now - started)
            return value
        } catch {
            metrics.databaseCall(succeeded: false, duration: ContinuousClock.now - started)
            throw error
        }
    }

    /// A provider call's result and how long it took.
    enum Answer<T> {
        case success(T, Duration)
        case failure(ProviderFailure, Duration)
    }

    /// Runs a provider call for the app `clientID` once its rate limits allow (at the slot of
    /// `ticket` when one was booked), timing it; the provider's refusals come back as values, and
    /// anything unexpected (an interrupted call) as a transient failure. A 429 pauses all of the
    /// app's calls for its `Retry-After`.
    func call<T>(
        _ provider: ProviderName,
        _ clientID: String,
        _ endpoint: String,
        ticket: OutboundRateLimits.Ticket? = nil,
        _ body: () async throws -> T
    ) async -> Answer<T> {
        var started = ContinuousClock.now
        let answer: Answer<T>
        do {
            try await rateLimits.admit(clientID, ticket: ticket)
            started = ContinuousClock.now
            let value = try await body()
            answer = .success(value, ContinuousClock.now - started)
        } catch let failure as ProviderFailure {
            if failure.httpStatus == 429 { rateLimits.throttled(clientID, retryAfter: failure.retryAfter) }
            answer = .failure(failure, ContinuousClock.now - started)
        } catch {
            let failure = ProviderFailure(
                endpoint: endpoint,
                classification: .transient,
                httpStatus: nil,
                detail: "the call was interrupted (\(type(of: error)))"
            )
            answer = .failure(failure, ContinuousClock.now - started)
        }
        switch answer {
        case .success(_, let latency): metrics.providerCall(provider, endpoint: endpoint, status: 200, duration: latency)
        case .failure(let failure, let latency): metrics.providerCall(provider, endpoint: endpoint, status: failure.httpStatus, duration: latency)
        }
        return answer
    }
}
