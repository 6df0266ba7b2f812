// swift-tools-version:6.2

import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "revoker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "revoker", targets: ["revoker"]),
        .library(name: "AppleSignIn", targets: ["AppleSignIn"]),
        .library(name: "AppleSignInSandbox", targets: ["AppleSignInSandbox"]),
        .library(name: "RevokerStore", targets: ["RevokerStore"]),
        .library(name: "RevokerHTTP", targets: ["RevokerHTTP"]),
        .library(name: "RevokerWorker", targets: ["RevokerWorker"]),
        .library(name: "RevokerConfiguration", targets: ["RevokerConfiguration"]),
        .library(name: "RevokerApp", targets: ["RevokerApp"]),
        .library(name: "RevokerBench", targets: ["RevokerBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "AppleSignIn",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppleSignInSandbox",
            dependencies: [
                "AppleSignIn",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerStore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            resources: [.embedInCode("Migrations")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerWorker",
            dependencies: [
                "AppleSignIn",
                "RevokerStore",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerHTTP",
            dependencies: [
                "AppleSignIn",
                "RevokerStore",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.embedInCode("Resources")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerConfiguration",
            dependencies: [
                "AppleSignIn",
                "RevokerHTTP",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerApp",
            dependencies: [
                "AppleSignIn",
                "RevokerConfiguration",
                "RevokerHTTP",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerLocalStack",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerConfiguration",
                "RevokerStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerDemo",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerConfiguration",
                "RevokerHTTP",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerTesting",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerConfiguration",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RevokerBench",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerConfiguration",
                "RevokerHTTP",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "revoker",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerBench",
                "RevokerConfiguration",
                "RevokerDemo",
                "RevokerHTTP",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerWorker",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppleSignInTests",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerLocalStack",
                "RevokerTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppleSignInSandboxTests",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerLocalStack",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevokerWorkerTests",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerConfiguration",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerTesting",
                "RevokerWorker",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevokerHTTPTests",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerApp",
                "RevokerConfiguration",
                "RevokerHTTP",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerTesting",
                "RevokerWorker",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevokerStoreTests",
            dependencies: ["RevokerConfiguration", "RevokerStore", "RevokerLocalStack", "RevokerTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevokerBenchTests",
            dependencies: ["RevokerBench", "RevokerLocalStack", "RevokerTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevokerCLITests",
            dependencies: [
                "AppleSignIn",
                "AppleSignInSandbox",
                "RevokerConfiguration",
                "RevokerLocalStack",
                "RevokerStore",
                "RevokerTesting",
                "RevokerWorker",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
