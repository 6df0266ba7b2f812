import Benchmark
import Foundation
import RevokerStore

/// Sealing a credential as a request is stored, and opening it as the worker claims the request
/// (AES-256-GCM, bound to the request id and kind).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 1_000,
        scalingFactor: .kilo,
        maxDuration: .seconds(5),
        maxIterations: 10_000
    )

    Benchmark("CredentialSealer.seal (refresh token)") { (benchmark: Benchmark, fixture: SealingFixture) in
        for _ in benchmark.scaledIterations {
            blackHole(try fixture.sealer.seal(fixture.credential, requestID: fixture.requestID))
        }
    } setup: {
        try SealingFixture()
    }

    Benchmark("CredentialSealer.open (refresh token)") { (benchmark: Benchmark, fixture: SealingFixture) in
        for _ in benchmark.scaledIterations {
            blackHole(try fixture.sealer.open(fixture.sealed, requestID: fixture.requestID, kind: .refreshToken))
        }
    } setup: {
        try SealingFixture()
    }
}

/// A sealer over a one-key keyring and a refresh token of the length Apple issues.
struct SealingFixture: Sendable {
    let sealer: CredentialSealer
    let credential = Credential(kind: .refreshToken, secret: "r7d1c0a4e2b9f8a6c5d3e1f0a9b8c7d6e.0.srvw.Qk3x9ZlC2mN8pR4tV6yA1bE5hJ7")
    let requestID = UUID()
    let sealed: SealedCredential

    init() throws {
        sealer = CredentialSealer(keyring: try CredentialKeyring(parsing: CredentialKeyring.generateEntry(keyID: "k1")))
        sealed = try sealer.seal(credential, requestID: requestID)
    }
}
