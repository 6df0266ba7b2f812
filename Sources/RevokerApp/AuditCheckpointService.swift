import Logging
import RevokerEvidence
import RevokerStore
import ServiceLifecycle

/// Takes a signed checkpoint of the audit trail every interval, and a last one at shutdown so
/// that a drain's final rows are covered before it exits. Any number of processes may run it:
/// an advisory lock lets one at a time write.
struct AuditCheckpointService: Service {
    let checkpoints: AuditCheckpoints
    let key: AuditSigningKey
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                await take()
            }
        }
        await take()
    }

    private func take() async {
        do {
            // Bounded: a statement that never answers must not hold up a shutdown.
            let checkpoints = self.checkpoints
            let key = self.key
            if let checkpoint = try await withDeadline(.seconds(120), { try await checkpoints.take(signingWith: key) }) {
                logger.debug(
                    "Audit checkpoint taken",
                    metadata: ["revoker.checkpoint": "\(checkpoint.seq)", "revoker.rows": "\(checkpoint.rowCount)"]
                )
            }
        } catch {
            logger.warning("Could not take an audit checkpoint; the next interval tries again", metadata: ["revoker.error": "\(error)"])
        }
    }
}
