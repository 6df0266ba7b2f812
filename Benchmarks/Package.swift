// swift-tools-version:6.1

// Micro-benchmarks of Revoker's hot pieces with package-benchmark, in a package of their own so
// that the main package's build and tests never pull in the benchmark tooling. Run them with
// scripts/microbench; README.md says what each one measures.

import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "RevokerBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The name keeps `package: "revoker"` working whatever the checkout's folder is called.
        .package(name: "revoker", path: ".."),
        // MallocInterposer only: malloc counts need no jemalloc on Swift 6.3, and leaving out the
        // default RuntimeInterposer trait (ARC counts on Linux) drops swift-runtime-interposer,
        // which the mirrors do not hold.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
    ],
    targets: [
        benchmark("ClientSecretBenchmarks", [.product(name: "AppleSignIn", package: "revoker"), .product(name: "Crypto", package: "swift-crypto")]),
        benchmark(
            "IdentityTokenBenchmarks",
            [
                .product(name: "AppleSignIn", package: "revoker"),
                .product(name: "RevokerProvider", package: "revoker"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        benchmark("FormEncodingBenchmarks", [.product(name: "RevokerProvider", package: "revoker")]),
        benchmark("CredentialSealingBenchmarks", [.product(name: "RevokerStore", package: "revoker")]),
    ]
)

/// One suite: an executable under Benchmarks/<name> that the benchmark plugin runs.
func benchmark(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: dependencies + [.product(name: "Benchmark", package: "benchmark")],
        path: "Benchmarks/\(name)",
        swiftSettings: swiftSettings,
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}
