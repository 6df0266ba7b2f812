import ServiceLifecycle
import Synchronization

/// Notes when the group's graceful shutdown began. It is the group's last service, so the first
/// one told to shut down: that moment is the start of the shutdown.
final class ShutdownWatch: Service {
    private let start = Mutex<ContinuousClock.Instant?>(nil)

    /// When the shutdown began; nil while none did.
    var began: ContinuousClock.Instant? { start.withLock { $0 } }

    func run() async throws {
        // Throws on cancellation: the group is being torn down without a graceful shutdown.
        try await gracefulShutdown()
        start.withLock { $0 = .now }
    }
}
