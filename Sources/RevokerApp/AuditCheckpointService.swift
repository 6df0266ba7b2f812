import CoreMetrics
import Logging
import RevokerEvidence
import RevokerStore
import ServiceLifecycle

/// Takes a signed checkpoint of the audit trail every interval, and a last one at shutdown so
/// that a drain's final rows are covered before it exits. Any number of processes may run it:
/// an advisory lock lets one at a time write.
///
/// It says loudly when it will not sign (the trail no longer extends what was signed: error
/// log, `revoker_audit_checkpoint_refused`, `/readyz`, a `checkpoint_refused` audit row that
/// app backends receive as `audit.checkpoint_refused`), and when transactions held open keep
/// rows out of checkpoints (warning log with who holds them, `revoker_audit_open_transactions`,
/// `revoker_audit_oldest_open_transaction_seconds`).
struct AuditCheckpointService: Service {
    let checkpoints: AuditCheckpoints
    let signer: AuditSigner
    let interval: Duration
    let metrics: any MetricsFactory
    let logger: Logger

    /// An open transaction older than this is logged as a warning (once per transaction).
    static let openTransactionWarning: Double = 300

    func run() async throws {
        var reported = await cancelWhenGracefulShutdown {
            var reported = Reported()
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    break
                }
                await take(&reported)
            }
            return reported
        }
        await take(&reported)
    }

    /// What was already said, so that a state is logged when it starts rather than every interval.
    struct Reported: Sendable {
        var refusal: AuditSigner.Refusal?
        var openTransactions: Set<UInt64> = []
    }

    private func take(_ reported: inout Reported) async {
        do {
            // Bounded: a statement that never answers (one cut off by a failover) must not hold up
            // the next checkpoints or a shutdown. A minute's rows take well under a second.
            let checkpoints = self.checkpoints
            let signer = self.signer
            if let checkpoint = try await withDeadline(.seconds(30), { try await checkpoints.take(signer: signer) }) {
                logger.debug(
                    "Audit checkpoint taken",
                    metadata: ["revoker.checkpoint": "\(checkpoint.seq)", "revoker.rows": "\(checkpoint.rowCount)"]
                )
            }
            reported.refusal = nil
            Gauge(label: "revoker_audit_checkpoint_refused", factory: metrics).record(0)
        } catch let error as RevokerStoreError where error.code == .historyRewritten {
            await refused(error, &reported)
        } catch {
            logger.warning("Could not take an audit checkpoint; the next interval tries again", metadata: ["revoker.error": "\(error)"])
        }
        do {
            let added = try await checkpoints.ensurePartitions()
            if added > 0 { logger.info("Added the audit trail's partitions for the months ahead", metadata: ["revoker.partitions": "\(added)"]) }
        } catch {
            logger.warning("Could not add the audit trail's partitions ahead; the next interval tries again", metadata: ["revoker.error": "\(error)"])
        }
        await reportOpenTransactions(&reported)
    }

    private func refused(_ error: RevokerStoreError, _ reported: inout Reported) async {
        Gauge(label: "revoker_audit_checkpoint_refused", factory: metrics).record(1)
        guard let refusal = signer.refusal, refusal != reported.refusal else { return }
        reported.refusal = refusal
        Counter(label: "revoker_audit_checkpoint_refusals_total", dimensions: [("reason", refusal.code)], factory: metrics).increment()
        logger.error(
            "Refusing to sign an audit checkpoint: the trail no longer extends the checkpoints signed before",
            metadata: ["revoker.error": "\(error.message)", "revoker.reason": "\(refusal.code)"]
        )
        do {
            try await checkpoints.recordRefusal(refusal, actor: "revoker")
        } catch {
            logger.error("Could not record the checkpoint refusal in the audit trail", metadata: ["revoker.error": "\(error)"])
        }
    }

    private func reportOpenTransactions(_ reported: inout Reported) async {
        let checkpoints = self.checkpoints
        guard let open = try? await withDeadline(.seconds(10), { try await checkpoints.openTransactions() }) else { return }
        Gauge(label: "revoker_audit_open_transactions", factory: metrics).record(open.count)
        Gauge(label: "revoker_audit_oldest_open_transaction_seconds", factory: metrics).record(open.compactMap(\.ageSeconds).max() ?? 0)
        for transaction in open where (transaction.ageSeconds ?? 0) >= Self.openTransactionWarning {
            guard reported.openTransactions.insert(transaction.txid).inserted else { continue }
            logger.warning(
                "A transaction held open keeps any audit rows it writes out of checkpoints until it ends",
                metadata: ["revoker.transaction": "\(transaction.summary)"]
            )
        }
        reported.openTransactions.formIntersection(open.map(\.txid))
    }
}
