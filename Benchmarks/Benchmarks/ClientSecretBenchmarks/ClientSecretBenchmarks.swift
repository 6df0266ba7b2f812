import AppleSignIn
import Benchmark
import Crypto

/// Signing the ES256 client secret that every call to Apple carries (one per attempt at a request).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        timeUnits: .microseconds,
        warmupIterations: 100,
        maxDuration: .seconds(5),
        maxIterations: 20_000
    )

    Benchmark("ClientSecretSigner.sign") { (benchmark: Benchmark, signer: ClientSecretSigner) in
        for _ in benchmark.scaledIterations {
            blackHole(try await signer.sign())
        }
    } setup: {
        let app = try AppleApp(
            clientID: "com.example.revoker.signin",
            teamID: "ABCDE12345",
            keyID: "KEY0123456",
            signingKey: AppleSigningKey(P256.Signing.PrivateKey())
        )
        return try await ClientSecretSigner(app: app)
    }
}
