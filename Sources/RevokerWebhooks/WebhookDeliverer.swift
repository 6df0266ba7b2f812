import AsyncHTTPClient
import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import RevokerProvider
import RevokerStore
import ServiceLifecycle
import Synchronization
import Tracing

/// Delivers the event feed to the configured webhook endpoints, as a service of the worker
/// processes (any number of them).
///
/// An endpoint is served by one worker at a time (its lease), in feed order, one event at a
/// time: the cursor moves only after a 2xx, so delivery is at least once and a repeat (after a
/// worker died mid-call) carries the same `webhook-id`. A failure waits a capped exponential
/// backoff with full jitter, or the `Retry-After` asked for, and is retried for as long as it
/// takes; an endpoint failing longer than `parkAfter` is shown as parked until it answers 2xx.
///
/// Each endpoint has a loop of its own: one that is slow or does not answer delays only its
/// own events, never another endpoint's.
///
/// Beside `revoker drain` it stops once the worker has finished and every endpoint has what the
/// drain produced, or is failing (its events wait for the next run), or ``WebhookSettings/drainLimit``
/// has passed.
public struct WebhookDeliverer: Service {
    let endpoints: [WebhookEndpoint]
    let settings: WebhookSettings
    let feed: EventFeed
    let deliveries: WebhookDeliveries
    let httpClient: HTTPClient
    let owner: String
    let metrics: any MetricsFactory
    let workFinished: AsyncStream<Void>?
    let logger: Logger

    /// `workFinished`, when given, ends when a draining worker has finished: the deliverer then
    /// catches up and returns instead of running until shutdown.
    public init(
        endpoints: [WebhookEndpoint],
        settings: WebhookSettings,
        database: PostgresClient,
        httpClient: HTTPClient,
        owner: String,
        metrics: any MetricsFactory = MetricsSystem.factory,
        workFinished: AsyncStream<Void>? = nil,
        logger: Logger
    ) {
        self.endpoints = endpoints
        self.settings = settings
        self.feed = EventFeed(client: database, logger: logger)
        self.deliveries = WebhookDeliveries(client: database, logger: logger)
        self.httpClient = httpClient
        self.owner = owner
        self.metrics = metrics
        self.workFinished = workFinished
        self.logger = logger
    }

    /// An HTTP client for webhooks: redirects are not followed (a redirect must not carry a
    /// signed event elsewhere). The caller shuts it down.
    public static func makeHTTPClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        configuration.decompression = .disabled
        // Its own spans would record the URL (a query may carry the backend's token): ``send(_:to:)``
        // makes the delivery span and the `traceparent` header instead.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    public func run() async throws {
        guard !endpoints.isEmpty else {
            try? await gracefulShutdown()
            return
        }
        // Set when the draining worker has finished: from then on every visit may be the last.
        let drainDeadline = DrainDeadline()
        // One wake-up stream per endpoint, each fed by the same NOTIFY, poll and shutdown.
        let channels = endpoints.map { _ in AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }
        let wakeAll: @Sendable () -> Void = { for channel in channels { channel.continuation.yield() } }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { background in
                background.addTask { await self.listen(wakeAll) }
                // The poll also brings retries that fell due.
                background.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: self.settings.pollInterval)
                        wakeAll()
                    }
                }
                if let workFinished {
                    background.addTask {
                        for await _ in workFinished {}
                        drainDeadline.set(.now + self.settings.drainLimit)
                        wakeAll()
                    }
                }
                wakeAll()
                // A loop per endpoint: a slow or dead endpoint delays its own events only.
                await withDiscardingTaskGroup { loops in
                    for (endpoint, channel) in zip(endpoints, channels) {
                        loops.addTask { await self.deliver(to: endpoint, wakeUps: channel.stream, drainDeadline: drainDeadline) }
                    }
                }
                background.cancelAll()
            }
        } onGracefulShutdown: {
            wakeAll()
        }
    }

    /// Serves one endpoint on every wake-up until shutdown or, beside a drain, until
    /// ``drainIsOver(_:after:deadline:)``.
    func deliver(to endpoint: WebhookEndpoint, wakeUps: AsyncStream<Void>, drainDeadline: DrainDeadline) async {
        // Registered once the database answers; until then every wake-up retries it.
        var registered = false
        for await _ in wakeUps {
            if Task.isShuttingDownGracefully { break }
            if !registered {
                do {
                    try await database { [deliveries, settings] in try await deliveries.register([endpoint.name], fromStart: settings.fromStart) }
                    registered = true
                } catch {
                    logger.warning(
                        "Could not register the webhook endpoint; retrying",
                        metadata: ["revoker.webhook": "\(endpoint.name)", "revoker.error": .string(SafeText.describing(error))]
                    )
                    if let deadline = drainDeadline.value, ContinuousClock.now >= deadline { break }
                    continue
                }
            }
            let visit = await serve(endpoint)
            if let deadline = drainDeadline.value, await drainIsOver(endpoint, after: visit, deadline: deadline) { break }
        }
    }

    /// After a drain: whether the endpoint has all the events committed for it, or is failing
    /// or served elsewhere (the next run or another worker goes on), or time is up.
    func drainIsOver(_ endpoint: WebhookEndpoint, after visit: Visit, deadline: ContinuousClock.Instant) async -> Bool {
        switch visit {
        case .failed, .notDue:
            return true
        case .caughtUp(let cursor):
            // Events whose transaction is committed but not yet readable come next.
            let pending = try? await database { [feed] in
                try await feed.hasCommittedEvents(after: cursor, clientIDs: endpoint.clientIDs.sorted())
            }
            if pending == false { return true }
        case .interrupted:
            break
        }
        guard ContinuousClock.now < deadline else {
            logger.notice(
                "The drain ends with webhook events still to send; the next run or a worker sends them",
                metadata: ["revoker.webhook": "\(endpoint.name)"]
            )
            return true
        }
        return false
    }

    /// Wakes the endpoints on every NOTIFY of new events; reconnects after a database outage.
    func listen(_ wake: @escaping @Sendable () -> Void) async {
        while !Task.isCancelled {
            do {
                try await feed.withWakeUps { wakeUps in
                    for try await _ in wakeUps { wake() }
                }
            } catch {
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// How one visit to an endpoint ended.
    enum Visit: Sendable {
        /// Every event readers can see was delivered; the cursor stands here.
        case caughtUp(EventCursor?)
        /// The endpoint refused or did not answer: it waits its backoff.
        case failed
        /// Another worker holds its lease, or its next attempt is not due yet.
        case notDue
        /// The database failed, the lease was lost, or the process is shutting down.
        case interrupted
    }

    /// Delivers what is due to one endpoint, if this worker gets its lease.
    func serve(_ endpoint: WebhookEndpoint) async -> Visit {
        var logger = self.logger
        logger[metadataKey: "revoker.webhook"] = "\(endpoint.name)"
        do {
            guard
                var lease = try await database({ [deliveries, owner, settings] in
                    try await deliveries.lease(endpoint.name, owner: owner, duration: settings.lease)
                })
            else { return .notDue }
            let clientIDs = endpoint.clientIDs.sorted()
            while true {
                let cursor = lease.cursor
                let events = try await database { [feed, settings] in
                    try await feed.events(after: cursor, clientIDs: clientIDs, limit: settings.batchSize)
                }
                if events.isEmpty {
                    try await database { [deliveries, lease] in try await deliveries.release(lease) }
                    return .caughtUp(lease.cursor)
                }
                for event in events {
                    if Task.isShuttingDownGracefully {
                        try await database { [deliveries, lease] in try await deliveries.release(lease) }
                        return .interrupted
                    }
                    switch await send(event, to: endpoint) {
                    case .delivered(let status):
                        record(endpoint, "delivered")
                        let held = lease
                        guard
                            try await database({ [deliveries, settings] in
                                try await deliveries.delivered(held, through: event.cursor, status: status, extend: settings.lease)
                            })
                        else {
                            logger.notice("Lost the webhook lease; another worker continues")
                            return .interrupted
                        }
                        if lease.attempts > 0 { logger.notice("Webhook endpoint answers again", metadata: ["http.status": "\(status)"]) }
                        lease.cursor = event.cursor
                        lease.attempts = 0
                    case .failed(let status, let reason, let retryAfter):
                        record(endpoint, status.map { "http_\($0 / 100)xx" } ?? "unreachable")
                        let delay = backoff(afterFailures: lease.attempts + 1, retryAfter: retryAfter)
                        let held = lease
                        _ = try await database { [deliveries, settings] in
                            try await deliveries.failed(held, status: status, error: reason, delay: delay, parkAfter: settings.parkAfter)
                        }
                        let level: Logger.Level = lease.attempts == 0 ? .warning : .debug
                        logger.log(
                            level: level,
                            "Webhook delivery failed; retrying later",
                            metadata: [
                                "http.status": "\(status.map(String.init) ?? "-")", "revoker.error": "\(reason)",
                                "revoker.retry_in_ms": "\(delay.milliseconds)",
                            ]
                        )
                        return .failed
                    }
                }
            }
        } catch {
            logger.warning(
                "Database error while delivering webhooks; the lease will expire",
                metadata: ["revoker.error": .string(SafeText.describing(error))]
            )
            return .interrupted
        }
    }

    /// A database call bounded by ``WebhookSettings/databaseTimeout``.
    @discardableResult
    func database<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withDeadline(settings.databaseTimeout, body)
    }

    enum Result: Sendable {
        case delivered(Int)
        case failed(status: Int?, reason: String, retryAfter: Duration?)
    }

    /// POSTs one event, signed; a 2xx is delivered, anything else (or no answer) failed.
    ///
    /// Each delivery is a span continuing the trace of the request the event reports, and its
    /// `traceparent` header names that span, so the backend's handler joins the trace. Without
    /// a tracer the request's stored `traceparent` goes out as it came.
    func send(_ event: OutboxEvent, to endpoint: WebhookEndpoint) async -> Result {
        await withSpan("webhook delivery", context: event.traceParent?.context ?? .topLevel, ofKind: .client) { span in
            if span.isRecording {
                span.attributes["revoker.webhook"] = endpoint.name
                span.attributes["revoker.event.type"] = event.type
                span.attributes["revoker.event.id"] = event.id.uuidString.lowercased()
            }
            let traceParent = TraceParent.of(ServiceContext.current) ?? event.traceParent
            let result = await post(event, to: endpoint, traceParent: traceParent)
            switch result {
            case .delivered(let status):
                span.attributes["http.response.status_code"] = status
            case .failed(let status, let reason, _):
                span.attributes["http.response.status_code"] = status
                span.setStatus(SpanStatus(code: .error, message: reason))
            }
            return result
        }
    }

    private func post(_ event: OutboxEvent, to endpoint: WebhookEndpoint, traceParent: TraceParent?) async -> Result {
        let body = Array(event.json.utf8)
        let id = event.id.uuidString.lowercased()
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Revoker-Webhooks/1.0")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature", value: endpoint.secret.signature(id: id, timestamp: timestamp, body: body))
        if let traceParent { request.headers.add(name: TraceParent.headerName, value: traceParent.rawValue) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let (httpClient, timeout) = (httpClient, settings.timeout)
        do {
            // The whole exchange, head and body, within the timeout: an endpoint trickling its
            // answer must not hold the endpoint's lease, nor the drain, past it.
            let (status, retryAfter) = try await withDeadline(timeout) { [request] in
                let response = try await httpClient.execute(request, timeout: TimeAmount(timeout))
                // The answer's body is not needed; read a little so the connection can be reused.
                _ = try? await response.body.collect(upTo: 64 * 1024)
                try Task.checkCancellation()
                return (Int(response.status.code), response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) })
            }
            if (200..<300).contains(status) { return .delivered(status) }
            return .failed(status: status, reason: "the endpoint answered \(status)", retryAfter: retryAfter)
        } catch is DeadlineExceeded {
            return .failed(status: nil, reason: "no complete answer within the timeout", retryAfter: nil)
        } catch {
            return .failed(status: nil, reason: "no answer (\(type(of: error)))", retryAfter: nil)
        }
    }

    /// Full jitter over a doubling delay, capped; a longer `Retry-After` wins.
    func backoff(afterFailures failures: Int, retryAfter: Duration?) -> Duration {
        let cap = settings.retryCap / .milliseconds(1)
        let exponential = settings.retryBase / .milliseconds(1) * pow(2, Double(min(failures - 1, 30)))
        let jittered = Duration.milliseconds(Int64(Double.random(in: 0...min(cap, exponential))))
        return max(jittered, retryAfter ?? .zero)
    }

    func record(_ endpoint: WebhookEndpoint, _ result: String) {
        Counter(label: "revoker_webhook_deliveries_total", dimensions: [("endpoint", endpoint.name), ("result", result)], factory: metrics)
            .increment()
    }
}

/// When a draining deliverer gives up on what is left; nil while the worker is still draining.
final class DrainDeadline: Sendable {
    private let instant = Mutex<ContinuousClock.Instant?>(nil)

    var value: ContinuousClock.Instant? { instant.withLock { $0 } }

    func set(_ deadline: ContinuousClock.Instant) { instant.withLock { $0 = deadline } }
}
