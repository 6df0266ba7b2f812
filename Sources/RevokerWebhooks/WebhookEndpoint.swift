import Foundation

/// One configured receiver of events: where to POST them, how to sign them, which apps' events.
public struct WebhookEndpoint: Sendable, CustomStringConvertible {
    /// Stable name: the delivery state is kept under it.
    public var name: String
    /// An `https://` URL (or `http://` on a loopback host, for tests).
    public var url: String
    public var secret: WebhookSecret
    /// The apps whose events it receives.
    public var clientIDs: Set<String>

    public init(name: String, url: String, secret: WebhookSecret, clientIDs: Set<String>) {
        self.name = name
        self.url = url
        self.secret = secret
        self.clientIDs = clientIDs
    }

    public var description: String { "WebhookEndpoint(\(name))" }
}

/// How webhooks are delivered.
public struct WebhookSettings: Sendable, Equatable {
    /// The deadline of one POST, connection to last byte.
    public var timeout: Duration = .seconds(10)
    /// The first retry delay; it doubles per failure, with full jitter.
    public var retryBase: Duration = .seconds(1)
    /// The longest retry delay (a `Retry-After` may ask for longer, up to a day).
    public var retryCap: Duration = .seconds(600)
    /// An endpoint failing this long is parked: shown by `revoker status`, metrics and
    /// `GET /v1/events/deliveries`, and still retried every ``retryCap``.
    public var parkAfter: Duration = .seconds(3600)
    /// How long a worker holds an endpoint; extended after each delivered event.
    public var lease: Duration = .seconds(60)
    /// How often endpoints are looked at when no event wakes the deliverer.
    public var pollInterval: Duration = .seconds(5)
    /// Events read per round trip.
    public var batchSize = 50
    /// How long `revoker drain`, once the queue is empty, keeps sending what the drain produced
    /// before it exits (an endpoint that fails is left for the next run at once).
    public var drainLimit: Duration = .seconds(60)
    /// Whether a newly configured endpoint receives the events from before it was added.
    public var fromStart = false
    /// The longest a database call may take before the visit gives up (the lease then
    /// expires): a call that never answers must not stop deliveries, nor a shutdown.
    public var databaseTimeout: Duration = .seconds(10)

    public init() {}
}
