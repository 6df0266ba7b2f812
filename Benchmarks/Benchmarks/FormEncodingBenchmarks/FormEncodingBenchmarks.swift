import Benchmark
import RevokerProvider

/// The body of a call to Apple's `/auth/token`: a refresh-token validation, with the client
/// secret (an ES256 JWT of about 300 characters) as the longest field.
let tokenCallForm: [(String, String)] = [
    ("client_id", "com.example.revoker.signin"),
    ("client_secret", jwtLikeSecret),
    ("grant_type", "refresh_token"),
    ("refresh_token", "r7d1c0a4e2b9f8a6c5d3e1f0a9b8c7d6e.0.srvw.Qk3x9ZlC2mN8pR4tV6yA1bE5hJ7"),
]

/// Shaped like a signed client secret: base64url header, payload and P-256 signature.
let jwtLikeSecret =
    "eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTAxMjM0NTYiLCJ0eXAiOiJKV1QifQ"
    + ".eyJhdWQiOiJodHRwczovL2FwcGxlaWQuYXBwbGUuY29tIiwiZXhwIjoxNzUwMDAwMzAwLCJpYXQiOjE3NTAwMDAwMDAs"
    + "ImlzcyI6IkFCQ0RFMTIzNDUiLCJzdWIiOiJjb20uZXhhbXBsZS5yZXZva2VyLnNpZ25pbiJ9"
    + ".MEUCIQDm3q2Zx1f5Vb8T0nK4yR7wL9cP6aJ2hG5sD1eF8uI0oQIgY3tB7nM2kX9vC4zA1pW6rE8qS5dH0jL3fG7bN2mK9uA"

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        timeUnits: .nanoseconds,
        warmupIterations: 1_000,
        scalingFactor: .kilo,
        maxDuration: .seconds(5),
        maxIterations: 10_000
    )

    Benchmark("FormEncoding.encodedBytes (token call)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(FormEncoding.encodedBytes(tokenCallForm))
        }
    }

    Benchmark("FormEncoding.encode (token call)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(FormEncoding.encode(tokenCallForm))
        }
    }

    let body = FormEncoding.encode(tokenCallForm)
    Benchmark("FormEncoding.decode (token call)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(FormEncoding.decode(body))
        }
    }

    // The same form with a redirect URI, so that decoding meets percent escapes.
    let escaped = FormEncoding.encode(tokenCallForm + [("redirect_uri", "https://revoker.example.com/apple/callback?from=web")])
    Benchmark("FormEncoding.decode (token call, escaped redirect_uri)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(FormEncoding.decode(escaped))
        }
    }
}
