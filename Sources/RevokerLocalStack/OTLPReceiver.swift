import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An OpenTelemetry collector stand-in: `scripts/otlp-receiver` (OTLP/HTTP with protobuf, decoded
/// by the `opentelemetry-proto` package) as a child process, writing every span it receives to a
/// file that ``spans()`` reads back. The tests and the benchmark export to it.
public final class OTLPReceiver: Sendable {
    /// The collector's base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is appended).
    public let endpoint: String
    /// Where the spans are written, one JSON object a line.
    public let output: URL
    private let process: RevokerProcess.Handle

    /// One span as received.
    public struct Span: Sendable, CustomStringConvertible {
        public var traceID: String
        public var spanID: String
        /// Empty for a root span.
        public var parentSpanID: String
        public var name: String
        /// OTLP's numbering: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
        public var kind: Int
        public var service: String?
        /// Each attribute's value as text.
        public var attributes: [String: String]
        /// The spans it links to, as (trace id, span id).
        public var links: [[String]]

        public var description: String { "\(name) \(traceID)/\(spanID) <- \(parentSpanID.isEmpty ? "-" : parentSpanID) \(attributes)" }
    }

    private init(endpoint: String, output: URL, process: RevokerProcess.Handle) {
        self.endpoint = endpoint
        self.output = output
        self.process = process
    }

    /// The environment that points a `revoker` process at this receiver, sampling every trace
    /// unless `sampler` says otherwise, and exporting every 100 ms instead of every 5 s.
    public func environment(sampler: String = "always_on", ratio: Double? = nil) -> [String: String] {
        var environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": sampler, "OTEL_BSP_SCHEDULE_DELAY": "100"]
        if let ratio { environment["OTEL_TRACES_SAMPLER_ARG"] = String(ratio) }
        return environment
    }

    /// Tracing at a sampling ratio, exporting to a receiver.
    public struct Sampling: Sendable {
        public var receiver: OTLPReceiver
        /// 0 to 1: the share of new traces sampled.
        public var ratio: Double

        public init(receiver: OTLPReceiver, ratio: Double) {
            self.receiver = receiver
            self.ratio = ratio
        }

        /// The variables a `revoker` process traces with.
        public var environment: [String: String] {
            receiver.environment(sampler: "parentbased_traceidratio", ratio: ratio)
        }
    }

    /// Every span received so far.
    public func spans() throws -> [Span] {
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw ReceiverFailed(reason: "a line of \(output.path) is not an object")
            }
            let attributes = (object["attributes"] as? [String: Any] ?? [:]).mapValues { "\($0)" }
            return Span(
                traceID: object["trace_id"] as? String ?? "",
                spanID: object["span_id"] as? String ?? "",
                parentSpanID: object["parent_span_id"] as? String ?? "",
                name: object["name"] as? String ?? "",
                kind: object["kind"] as? Int ?? 0,
                service: object["service"] as? String,
                attributes: attributes,
                links: (object["links"] as? [[String: String]] ?? []).map { [$0["trace_id"] ?? "", $0["span_id"] ?? ""] }
            )
        }
    }

    /// Every line received so far, as written: what a search for a secret reads.
    public var rawText: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

    /// Runs `body` with a receiver listening on a free port of 127.0.0.1, stopped afterwards.
    /// The first run on a machine installs `opentelemetry-proto` (a minute or so).
    public static func with<T: Sendable>(_ body: (OTLPReceiver) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-otlp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = directory.appendingPathComponent("spans.jsonl")
        let process = try RevokerProcess.Handle(
            executable: script,
            arguments: ["--output", output.path],
            environment: ProcessInfo.processInfo.environment
        )
        let receiver: OTLPReceiver
        do {
            let deadline = ContinuousClock.now + .seconds(600)
            var port: Int?
            while port == nil {
                port = process.output.split(separator: "\n").lazy.compactMap { $0.hasPrefix("listening on ") ? Int($0.dropFirst(13)) : nil }.first
                guard process.isRunning || port != nil, ContinuousClock.now < deadline else {
                    throw ReceiverFailed(reason: "it did not start: \(process.errors.suffix(2000))")
                }
                if port == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            receiver = OTLPReceiver(endpoint: "http://127.0.0.1:\(port ?? 0)", output: output, process: process)
        } catch {
            process.signal(SIGKILL)
            throw error
        }
        defer {
            receiver.process.signal(SIGTERM)
            try? FileManager.default.removeItem(at: directory)
        }
        return try await body(receiver)
    }

    /// `scripts/otlp-receiver` of this source tree (or of the working directory).
    static var script: String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let beside = root.appendingPathComponent("scripts/otlp-receiver").path
        return FileManager.default.isExecutableFile(atPath: beside) ? beside : "scripts/otlp-receiver"
    }

    public struct ReceiverFailed: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { "the OTLP receiver failed: \(reason)" }
    }
}
