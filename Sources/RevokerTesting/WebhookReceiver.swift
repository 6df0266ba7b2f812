import Foundation
import HTTPTypes
import Hummingbird
import RevokerLocalStack
import RevokerWebhooks
import Synchronization

/// An app backend's webhook endpoint on a free loopback port: it checks every delivery's
/// Standard Webhooks signature with the shared secret, records it, and answers as the test's
/// plan says (2xx, an error, 429 with `Retry-After`, or slowly).
public final class WebhookReceiver: Sendable {
    /// One POST as received.
    public struct Delivery: Sendable {
        /// `webhook-id`: the event's id, the same on every repeat.
        public var id: String
        public var timestamp: Int64
        /// Whether `webhook-signature` verifies over `id.timestamp.body` with the secret.
        public var signatureValid: Bool
        /// The `webhook-signature` header as sent.
        public var signature: String
        public var body: String
        /// The status the receiver answered.
        public var answered: Int
        /// When it arrived.
        public var receivedAt: Date
        /// The `traceparent` header, when one came.
        public var traceParent: String? = nil
        /// The event, parsed.
        public var event: [String: any Sendable] {
            ((try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]).mapValues { "\($0)" }
        }
        public var type: String? { event["type"] as? String }
        public var clientID: String? { event["client_id"] as? String }
        public var cursor: String? { event["cursor"] as? String }
    }

    /// How to answer the `n`th POST (from 0).
    public enum Answer: Sendable {
        case status(Int)
        case retryAfter(seconds: Int)
        /// Waits, then answers 200 (a delivery in flight, for a worker to die during).
        case slow(Duration)
    }

    /// `http://127.0.0.1:PORT/hook`.
    public let url: String
    /// The secret's file, as a `webhooks` entry names it.
    public let secretFile: String
    private let secret: WebhookSecret
    private let state = Mutex<(deliveries: [Delivery], plan: @Sendable (Int) -> Answer)>(([], { _ in .status(204) }))

    private init(url: String, secretFile: String, secret: WebhookSecret) {
        self.url = url
        self.secretFile = secretFile
        self.secret = secret
    }

    /// Everything received so far, in arrival order.
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    /// Sets how later POSTs are answered, by their index among all POSTs.
    public func plan(_ answer: @escaping @Sendable (Int) -> Answer) { state.withLock { $0.plan = answer } }

    /// The `webhooks` entry for Revoker's configuration.
    public func configurationEntry(name: String, clientIDs: [String]) -> [String: any Sendable] {
        ["name": name, "url": url, "secret_file": secretFile, "client_ids": clientIDs]
    }

    /// Starts a receiver with a new secret (written to a private file), runs `body`, stops it.
    public static func with<T: Sendable>(_ body: (WebhookReceiver) async throws -> T) async throws -> T {
        let text = WebhookSecret.generate()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("revoker-webhook-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: file, contents: Data((text + "\n").utf8), attributes: [.posixPermissions: 0o600]),
            let secret = WebhookSecret(text)
        else { throw CocoaError(.fileWriteUnknown) }
        defer { try? FileManager.default.removeItem(atPath: file) }
        let box = Mutex<WebhookReceiver?>(nil)
        let router = Router()
        router.post("hook") { request, _ -> Response in
            guard let receiver = box.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            return try await receiver.receive(request)
        }
        let serve = { (running: @escaping @Sendable (Int) async -> Void) in
            Application(
                router: router,
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { await running($0.localAddress?.port ?? 0) }
            )
        }
        return try await withServingApplication(serve) { port in
            let receiver = WebhookReceiver(url: "http://127.0.0.1:\(port)/hook", secretFile: file, secret: secret)
            box.withLock { $0 = receiver }
            return try await body(receiver)
        }
    }

    private func receive(_ request: Request) async throws -> Response {
        let receivedAt = Date()
        let body = Array(try await request.body.collect(upTo: 1024 * 1024).readableBytesView)
        let id = request.headers[HTTPField.Name("webhook-id")!] ?? ""
        let timestamp = Int64(request.headers[HTTPField.Name("webhook-timestamp")!] ?? "") ?? 0
        let signatureHeader = request.headers[HTTPField.Name("webhook-signature")!] ?? ""
        let signatures = signatureHeader.split(separator: " ").map(String.init)
        let valid =
            signatures.contains(secret.signature(id: id, timestamp: timestamp, body: body))
            && abs(Double(timestamp) - Date().timeIntervalSince1970) < 300
        let answer = state.withLock { $0.plan($0.deliveries.count) }
        var status = 200
        var headers: HTTPFields = [:]
        switch answer {
        case .status(let code): status = code
        case .retryAfter(let seconds):
            status = 429
            headers[.retryAfter] = String(seconds)
        case .slow(let pause):
            try? await Task.sleep(for: pause)
        }
        // A forged delivery is refused, as a receiver must.
        if !valid { status = 401 }
        let delivery = Delivery(
            id: id,
            timestamp: timestamp,
            signatureValid: valid,
            signature: signatureHeader,
            body: String(decoding: body, as: UTF8.self),
            answered: status,
            receivedAt: receivedAt,
            traceParent: request.headers[HTTPField.Name("traceparent")!]
        )
        state.withLock { $0.deliveries.append(delivery) }
        return Response(status: .init(code: status), headers: headers)
    }
}
