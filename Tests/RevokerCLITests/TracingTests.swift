import AppleSignInSandbox
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import ProviderSandbox
import RevokerApp
import RevokerLocalStack
import RevokerProvider
import RevokerStore
import RevokerTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Tracing by the `revoker` binary, exported over OTLP/HTTP to a real receiver
/// (`scripts/otlp-receiver`, decoding with the `opentelemetry-proto` package).
@Suite("Tracing: one trace from the API through the queue to the webhook")
struct TracingTests {
    static let notes = "com.example.notes"

    /// A backend's key that may ask for deletions.
    struct Key {
        let value = "rvk_test_" + UUID().uuidString
        var configuration: [[String: any Sendable]] {
            let digest = SHA256.hash(data: Array(value.utf8)).map { String(format: "%02x", $0) }.joined()
            return [["name": "backend", "sha256": digest, "scopes": ["revocations:write", "revocations:read"]]]
        }
    }

    /// Runs `revoker serve` (API and worker) with `extra` in its environment, and `body` with its
    /// API's base URL; stops it with SIGTERM (which flushes its spans) and returns what it printed.
    static func serving(
        _ stack: RevokerTestStack,
        extra: [String: String],
        _ body: (String) async throws -> Void
    ) async throws -> String {
        var environment = stack.environment.merging(extra) { $1 }
        environment["REVOKER_HTTP_PORT"] = "0"
        let serve = try RevokerProcess(["serve", "--log-level", "debug"], environment: environment)
        do {
            try await serve.waitForOutput("Serving the API")
            let port = try #require(
                serve.stderrSoFar.split(separator: " ").first { $0.hasPrefix("http.port=") }.flatMap { Int($0.dropFirst(10).prefix { $0.isNumber }) }
            )
            try await body("http://127.0.0.1:\(port)")
        } catch {
            serve.signal(SIGKILL)
            throw error
        }
        serve.signal(SIGTERM)
        let ended = try await serve.wait(timeout: .seconds(60))
        #expect(ended.status == 0, "\(ended.stderr.suffix(2000))")
        return ended.stdout + ended.stderr
    }

    /// `POST /v1/accounts/{reference}/deletion` with a refresh token Revoker never saw.
    static func requestDeletion(_ baseURL: String, key: Key, reference: String, token: String, traceParent: String?) async throws -> Int {
        var request = HTTPClientRequest(url: "\(baseURL)/v1/accounts/\(reference)/deletion")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key.value)")
        request.headers.add(name: "Content-Type", value: "application/json")
        if let traceParent { request.headers.add(name: "traceparent", value: traceParent) }
        request.body = .bytes(ByteBuffer(string: #"{"credential": {"client_id": "\#(notes)", "refresh_token": "\#(token)"}}"#))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }

    static func hex(_ count: Int) -> String {
        (0..<count).map { _ in String("0123456789abcdef".randomElement()!) }.joined()
    }

    @Test func aDeletionsTraceRunsFromTheAPIThroughTheAttemptAndItsProviderCallsToTheWebhook() async throws {
        try await OTLPReceiver.with { otlp in
            try await WebhookReceiver.with { receiver in
                let key = Key()
                try await RevokerTestStack.with(
                    worker: ["poll_interval_seconds": 0.2],
                    http: ["api_keys": key.configuration],
                    settings: receiver.settings(name: "notes-backend", clientIDs: [Self.notes])
                ) { stack in
                    let minted = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "sub-traced")
                    stack.secrets.add(minted.value)
                    let (traceID, incomingSpan) = (Self.hex(32), Self.hex(16))
                    let output = try await Self.serving(stack, extra: otlp.environment()) { baseURL in
                        let status = try await Self.requestDeletion(
                            baseURL,
                            key: key,
                            reference: "traced-account",
                            token: minted.value,
                            traceParent: "00-\(traceID)-\(incomingSpan)-01"
                        )
                        #expect(status == 202 || status == 201)
                        try await eventually("the revocation's webhook delivered") {
                            receiver.requestDeliveries.contains { $0.type == "revocation.succeeded" && (200..<300).contains($0.answered) }
                        }
                    }
                    try stack.expectNoSecrets(in: output)
                    #expect(output.contains("trace_id="), "log lines written in a span carry its trace id")

                    let spans = try otlp.spans().filter { $0.traceID == traceID }
                    let named = { (name: String) in spans.filter { $0.name == name } }
                    // The API's span continues the caller's: its parent is the caller's span.
                    let api = try #require(spans.first { $0.name.hasPrefix("POST") && $0.attributes["http.route"]?.contains("deletion") == true })
                    #expect(api.parentSpanID == incomingSpan)
                    #expect(api.kind == 2 && api.attributes["http.response.status_code"] != nil)
                    #expect(api.service == "revoker")
                    // The attempt continues the context stored with the request: the API span's.
                    let attempt = try #require(named("revocation attempt").first)
                    #expect(attempt.parentSpanID == api.spanID)
                    #expect(attempt.attributes["revoker.outcome"] == "revoked")
                    // Each provider call is the attempt's child, with its endpoint and status.
                    let calls = named("provider call")
                    #expect(Set(calls.compactMap { $0.attributes["revoker.provider.endpoint"] }).isSuperset(of: ["token", "revoke"]), "\(calls)")
                    #expect(calls.allSatisfy { $0.parentSpanID == attempt.spanID && $0.attributes["http.response.status_code"] == "200" })
                    #expect(calls.allSatisfy { $0.attributes["revoker.provider"] == "apple" })
                    // The webhook delivery continues it too, and its traceparent names the delivery span.
                    let delivery = try #require(named("webhook delivery").first { $0.attributes["revoker.event.type"] == "revocation.succeeded" })
                    #expect(delivery.parentSpanID == api.spanID)
                    let sent = try #require(receiver.requestDeliveries.first { $0.type == "revocation.succeeded" }?.traceParent)
                    #expect(sent == "00-\(traceID)-\(delivery.spanID)-01")
                    // The claim batch is a trace of its own that the attempt links to.
                    #expect(attempt.links.count == 1)

                    // No credential anywhere: the token, the sandbox's keys, the webhook secret, a signed client secret.
                    let exported = otlp.rawText
                    let webhookSecret = try String(contentsOfFile: receiver.secretFile, encoding: .utf8).trimmingCharacters(
                        in: .whitespacesAndNewlines
                    )
                    for secret in stack.secrets.all + stack.files.secretTexts + [webhookSecret, key.value] {
                        #expect(!exported.contains(secret), "a credential was exported in a span")
                    }
                    #expect(!exported.contains("eyJ"), "no JWT (client secret, identity token) in a span")
                }
            }
        }
    }

    /// The operator samples nothing of callers' traces (`parentbased_traceidratio` at 0): a
    /// caller's `sampled` flag does not make it export its trace, unless the operator trusts its
    /// callers (`tracing.trust_caller_sampling`).
    @Test(arguments: [false, true])
    func aCallersSampledFlagDecidesOnlyWhenTheOperatorTrustsItsCallers(_ trusted: Bool) async throws {
        let traceID = Self.hex(32)
        let names = try await OTLPReceiver.with { otlp in
            try await Self.exportedSpans(otlp, trustingCallers: trusted, traceID: traceID)
        }
        if trusted {
            #expect(names.contains { $0.hasPrefix("POST") }, "a trusted caller's flag is followed: \(names)")
        } else {
            #expect(names.isEmpty, "an untrusted caller's flag exports nothing: \(names)")
        }
    }

    /// The names of the spans of trace `traceID` that `revoker serve` exported for a deletion
    /// whose caller sent that trace sampled, under a sampler that keeps none.
    static func exportedSpans(_ otlp: OTLPReceiver, trustingCallers trusted: Bool, traceID: String) async throws -> [String] {
        let key = Key()
        let extra = otlp.environment().merging(["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"]) { $1 }
        let tracing: [String: any Sendable] = ["tracing": ["trust_caller_sampling": trusted] as [String: any Sendable]]
        return try await RevokerTestStack.with(
            worker: ["poll_interval_seconds": 0.2],
            http: ["api_keys": key.configuration],
            settings: tracing
        ) { stack in
            let minted = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "sub-sampled")
            stack.secrets.add(minted.value)
            _ = try await Self.serving(stack, extra: extra) { baseURL in
                let status = try await Self.requestDeletion(
                    baseURL,
                    key: key,
                    reference: "sampled-account",
                    token: minted.value,
                    traceParent: "00-\(traceID)-\(Self.hex(16))-01"
                )
                #expect(status == 202 || status == 201)
                try await eventually("the revocation ended") {
                    try await stack.requests().contains { $0.externalReference == "sampled-account" && $0.state.isFinal }
                }
            }
            return try otlp.spans().filter { $0.traceID == traceID }.map(\.name)
        }
    }

    @Test func tracingIsOffUnlessConfiguredAndItsHeadersAreNeverShown() throws {
        let off = try RevokerConfiguration.load(file: nil, environment: [:], needs: [])
        #expect(!off.tracing.enabled && off.tracing.loggingMetadataProvider == nil)

        let environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20s3cret"]
        let on = try RevokerConfiguration.load(file: nil, environment: environment.merging(["OTEL_BSP_SCHEDULE_DELAY": "100"]) { $1 }, needs: [])
        #expect(on.tracing.enabled && on.tracing.endpoint == "http://collector:4318/v1/traces")
        #expect(on.tracing.headers.map(\.value) == ["Bearer s3cret"])
        #expect(!"\(on.tracing.headers)".contains("s3cret"), "a header's value is never shown")
        // swift-otel logs the variables it applies: it is handed none of those Revoker reads itself.
        #expect(on.tracing.otherVariables == ["OTEL_BSP_SCHEDULE_DELAY": "100"])

        let traces = try RevokerConfiguration.load(
            file: nil,
            environment: environment.merging(["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/otlp"]) { $1 },
            needs: []
        )
        #expect(traces.tracing.endpoint == "https://traces.example/otlp")
        for switchOff in [["OTEL_SDK_DISABLED": "true"], ["OTEL_TRACES_EXPORTER": "none"]] {
            #expect(!(try RevokerConfiguration.load(file: nil, environment: environment.merging(switchOff) { $1 }, needs: [])).tracing.enabled)
        }
        do {
            _ = try RevokerConfiguration.load(file: nil, environment: ["OTEL_EXPORTER_OTLP_HEADERS": "s3cret-without-a-name"], needs: [])
            Issue.record("a malformed header list is refused")
        } catch {
            #expect(!"\(error)".contains("s3cret"), "the refusal names the setting, never its value")
        }
    }

    @Test func aMalformedTraceParentIsIgnoredAndUnconfiguredTracingExportsNothing() async throws {
        try await OTLPReceiver.with { otlp in
            let key = Key()
            try await RevokerTestStack.with(worker: ["poll_interval_seconds": 0.2], http: ["api_keys": key.configuration]) { stack in
                // Malformed: uppercase hex. The request is accepted and starts a trace of its own.
                let malformed = "00-\(Self.hex(32).uppercased())-\(Self.hex(16))-01"
                let first = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "sub-malformed")
                stack.secrets.add(first.value)
                _ = try await Self.serving(stack, extra: otlp.environment()) { baseURL in
                    let status = try await Self.requestDeletion(baseURL, key: key, reference: "malformed", token: first.value, traceParent: malformed)
                    #expect(status == 202 || status == 201)
                    try await eventually("revoked") { try await stack.requests().allSatisfy { $0.state == .succeeded } }
                }
                let spans = try otlp.spans()
                let api = try #require(spans.first { $0.name.hasPrefix("POST") })
                #expect(api.parentSpanID.isEmpty, "a malformed traceparent starts a new trace")
                #expect(!otlp.rawText.lowercased().contains(String(malformed.dropFirst(3).prefix(32)).lowercased()))
                let stored = try #require(try await stack.requests().first?.traceParent)
                #expect(stored.traceID == api.traceID)

                // Without OTEL_* variables or a tracing section, nothing is bootstrapped or exported.
                let before = try otlp.spans().count
                let second = try await stack.sandbox.admin.mintRefreshToken(clientID: Self.notes, subject: "sub-untraced")
                stack.secrets.add(second.value)
                let traceID = Self.hex(32)
                let output = try await Self.serving(stack, extra: [:]) { baseURL in
                    let status = try await Self.requestDeletion(
                        baseURL,
                        key: key,
                        reference: "untraced",
                        token: second.value,
                        traceParent: "00-\(traceID)-\(Self.hex(16))-01"
                    )
                    #expect(status == 202 || status == 201)
                    try await eventually("revoked") { try await stack.requests().allSatisfy { $0.state == .succeeded } }
                }
                try await Task.sleep(for: .milliseconds(500))
                #expect(try otlp.spans().count == before)
                #expect(!output.contains("trace_id="))
                // The caller's traceparent is still kept, for the webhooks to carry back.
                let kept = try await stack.requests().compactMap(\.traceParent).map(\.traceID)
                #expect(kept.contains(Substring(traceID)))

                // `revoker drain` flushes its spans as it ends.
                let queued = try await stack.enqueue(clientID: Self.notes, reference: "drained", kind: .refreshToken)
                let drained = try await RevokerProcess.run(["drain"], environment: stack.environment.merging(otlp.environment()) { $1 })
                #expect(drained.status == 0, "\(drained.stderr.suffix(1000))")
                let exported = try otlp.spans()
                let attempt = exported.first { $0.attributes["revoker.request.id"] == queued.request.id.uuidString.lowercased() }
                #expect(attempt?.name == "revocation attempt" && attempt?.parentSpanID.isEmpty == true, "\(exported)")
            }
        }
    }
}
