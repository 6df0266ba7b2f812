import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// Checks the audit trail's chains, heads and signed checkpoints (migrations 0006, 0007) and names
/// every row that was changed, removed, added or moved. It recomputes every hash itself and
/// trusts no function stored in the database.
public struct AuditVerifier: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// How long a transaction may have been running when a checkpoint was taken: a row whose
    /// time is further before a checkpoint that does not cover it was back-dated.
    public static let backdatingGrace: Int64 = 10 * 60 * 1_000_000

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Verifies rows that occurred at or after `since` (all by default) of `clientID` (all apps
    /// by default), and every checkpoint taken since then, against `keys`; and that every
    /// checkpoint in `witnessed` (kept outside the database) is still there, unchanged.
    ///
    /// With `afterNewestWitness`, what an earlier run verified is not read again: the checks start
    /// at the newest checkpoint of `witnessed` (when the database still holds it unchanged) and
    /// cover the checkpoints after it and the rows since it, an auditor's daily run.
    public func verify(
        since: Date? = nil,
        clientID: String? = nil,
        keys: [AuditPublicKey],
        witnessed: [AuditCheckpoint] = [],
        afterNewestWitness: Bool = false,
        logger: Logger? = nil
    ) async throws -> AuditVerification {
        let logger = logger ?? self.logger
        return try await StoreDatabase.run(logger) {
            var problems: [AuditProblem] = []
            let genesis = try await self.genesis()
            let checkpoints = try await AuditCheckpoints(client: self.client, logger: logger).all()
            // A witness's checkpoint signed by a key not given proves nothing either way.
            let (signed, unsigned) = (witnessed.filter { $0.isSigned(byOneOf: keys) }, witnessed.filter { !$0.isSigned(byOneOf: keys) })
            let start =
                afterNewestWitness
                ? signed.max { $0.seq < $1.seq }.flatMap { newest in checkpoints.first { $0.seq == newest.seq && $0.hash == newest.hash } }
                : nil
            // The signatures (50 µs each, a year holds 500,000) are checked beside the reads.
            async let signatures =
                Self.checkLinks(checkpoints, keys: keys, from: start)
                + unsigned.map {
                    AuditProblem(
                        .unknownKey,
                        "the witness's checkpoint \($0.seq) is not signed by a key given: it is not verifiable",
                        checkpoint: $0.seq
                    )
                }
                + AuditWitness.problems(checkpoints, witnessed: signed, keys: keys, complete: true).map { AuditProblem(.witnessMismatch, $0) }
            // Rows of transactions still open when the start was taken may be dated a little before it.
            let since = [since, start.map { Date(timeIntervalSince1970: Double($0.createdAtMicros - Self.backdatingGrace) / 1_000_000) }]
                .compactMap { $0 }.max()
            let sinceMicros = since.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded(.down)) }
            let scope = Scope(sinceMicros: sinceMicros, clientID: clientID)
            let covered = checkpoints.filter {
                $0.createdAtMicros >= (sinceMicros ?? .min) && $0.seq > (start?.seq ?? .min)
            }
            let (rows, chains): (Int, Int)
            let slices: Slices
            if scope.isWhole {
                // The whole trail in one read by id, rehashed as it comes, while the server follows
                // the chains' links beside it.
                async let links = self.followChainsOnServer(last: checkpoints.last)
                slices = try await self.checkSlices(covered, last: checkpoints.last, scope: scope)
                let followed = try await links
                problems += slices.changed + followed.problems
                (rows, chains) = (slices.rows, slices.chainsStartingAtOne + followed.chainsBesides)
            } else {
                (rows, chains) = try await self.checkChains(since: since, clientID: clientID, problems: &problems)
                try await self.checkHeads(clientID: clientID, since: since, last: checkpoints.last, problems: &problems)
                slices = try await self.checkSlices(covered, last: checkpoints.last, scope: scope)
            }
            problems += slices.problems
            problems = await signatures + problems
            let unknown = covered.filter { checkpoint in !keys.contains { $0.keyID == checkpoint.keyID } }
            return AuditVerification(
                rowsChecked: rows,
                chainsChecked: chains,
                checkpointsChecked: covered.count,
                rowsNotYetCheckpointed: slices.pending,
                rowsNotProven: unknown.reduce(0) { $0 + Int($1.rowCount) },
                witnessedCheckpoints: witnessed.count,
                lastCheckpointAt: checkpoints.last?.createdAt,
                lastCheckpoint: checkpoints.last,
                genesis: genesis,
                problems: problems
            )
        }
    }

    /// Which rows a verification reads and rehashes along their chains; the others are only
    /// proven to be where the checkpoints put them.
    struct Scope {
        var sinceMicros: Int64?
        var clientID: String?

        var isWhole: Bool { sinceMicros == nil && clientID == nil }

        func contains(occurredAt micros: Int64, clientID client: String?) -> Bool {
            (sinceMicros.map { micros >= $0 } ?? true) && (clientID == nil || client == clientID)
        }
    }

    private func genesis() async throws -> AuditVerification.Genesis? {
        let row = try await client.query("SELECT migrated_at, rows_brought_in FROM revoker.audit_genesis LIMIT 1", logger: logger)
            .collect().first?.decode((Date, Int64).self)
        return row.map { AuditVerification.Genesis(migratedAt: $0.0, rowsBroughtIn: $0.1) }
    }

    /// Signatures, hashes and the links between consecutive checkpoints; from `start` on when
    /// given (verified before, and matched against its witness).
    static func checkLinks(_ checkpoints: [AuditCheckpoint], keys: [AuditPublicKey], from start: AuditCheckpoint? = nil) -> [AuditProblem] {
        var problems: [AuditProblem] = []
        var previous = start
        for checkpoint in checkpoints where checkpoint.seq > (start?.seq ?? .min) {
            let seq = checkpoint.seq
            if !keys.contains(where: { $0.keyID == checkpoint.keyID }) {
                problems.append(
                    AuditProblem(
                        .unknownKey,
                        "checkpoint \(seq) is signed by key \(checkpoint.keyID), which was not given: its \(checkpoint.rowCount) rows are "
                            + "NOT VERIFIABLE (they may have been rewritten and the checkpoint relabelled); pass its public key to check them",
                        checkpoint: seq
                    )
                )
            } else if !checkpoint.isSigned(byOneOf: keys) {
                problems.append(
                    AuditProblem(.checkpointForged, "checkpoint \(seq): its signature does not match what it states", checkpoint: seq)
                )
            }
            let expectedSeq = (previous?.seq ?? 0) + 1
            let expectedFrom = previous?.txidTo ?? 0
            let expectedPrevious = previous?.hash ?? AuditCheckpoint.genesis
            if seq != expectedSeq {
                problems.append(
                    AuditProblem(
                        .checkpointForged,
                        "checkpoint \(seq) follows checkpoint \(expectedSeq - 1): checkpoints are missing",
                        checkpoint: seq
                    )
                )
            } else if checkpoint.previousHash != expectedPrevious || checkpoint.txidFrom != expectedFrom {
                problems.append(
                    AuditProblem(
                        .checkpointForged,
                        "checkpoint \(seq) does not continue checkpoint \(seq - 1) (previous hash or first transaction differ)",
                        checkpoint: seq
                    )
                )
            }
            previous = checkpoint
        }
        return problems
    }

    /// The columns ``decodeRow`` reads.
    static let rowColumns = """
        chain_key, chain_seq, id, \(SQLTime.micros("occurred_at")), txid::text, request_id, client_id, external_reference,
        apple_user_id, event, attempt, actor, apple_endpoint, http_status, apple_error, apple_error_description,
        latency_ms, detail, recorded_by, prev_hash, hash
        """

    /// A row of ``rowColumns``: the fields its hash covers, its previous hash and its hash.
    static func decodeRow(_ row: PostgresRow) throws -> (row: AuditChainRow, previous: [UInt8], hash: [UInt8]) {
        let cells = try row.decode(
            (
                String, Int64, Int64, Int64, String, UUID?, String?, String?, String?, String, Int?, String, String?, Int?, String?,
                String?, Int?, String?, String?, Data, Data
            ).self
        )
        let chainRow = AuditChainRow(
            chainKey: cells.0,
            chainSeq: cells.1,
            id: cells.2,
            occurredAtMicros: cells.3,
            txid: try AuditCheckpoints.txid(cells.4),
            requestID: cells.5,
            clientID: cells.6,
            externalReference: cells.7,
            userID: cells.8,
            event: cells.9,
            attempt: cells.10,
            actor: cells.11,
            providerEndpoint: cells.12,
            httpStatus: cells.13,
            providerError: cells.14,
            providerErrorDescription: cells.15,
            latencyMilliseconds: cells.16,
            detail: cells.17,
            recordedBy: cells.18
        )
        return (chainRow, Array(cells.19), Array(cells.20))
    }

    /// Recomputes every row's hash and follows each chain; returns (rows, chains) checked.
    private func checkChains(since: Date?, clientID: String?, problems: inout [AuditProblem]) async throws -> (Int, Int) {
        let sql: PostgresQuery = """
            SELECT \(unescaped: Self.rowColumns)
            FROM revoker.audit_events
            WHERE (\(since)::timestamptz IS NULL OR occurred_at >= \(since)::timestamptz)
              AND (\(clientID)::text IS NULL OR client_id = \(clientID)::text)
            ORDER BY chain_key, chain_seq
            """
        let rows = try await client.query(sql, logger: logger)
        var walker = ChainWalker(partial: since != nil)
        for try await row in rows {
            let (chainRow, previous, hash) = try Self.decodeRow(row)
            problems += walker.check(chainRow, previousHash: previous, hash: hash)
        }
        if !walker.continuing.isEmpty {
            let archived = try await AuditCheckpoints.archivedHeads(walker.continuing.map(\.chain), client: client, logger: logger)
            problems += ChainWalker.problems(walker.continuing, archived: archived)
        }
        return (walker.rows, walker.chains)
    }

    /// Each chain against the head its last checkpoint recorded (migration 0007; before it, the
    /// trigger kept the heads): finds rows removed from a chain's end, whole chains removed,
    /// the head's row rewritten, and rows under a checkpoint beyond their chain's head.
    ///
    /// From `since` on, only the chains with rows since then: a chain removed whole before then is
    /// found by the checkpoints' slices.
    private func checkHeads(clientID: String?, since: Date?, last: AuditCheckpoint?, problems: inout [AuditProblem]) async throws {
        let covered = String(last?.txidTo ?? 0)
        let open = (last?.openTxids ?? []).map(String.init)
        // Only the filters given are written: a subquery OR'd with "no filter" is not planned as a
        // join, and every row of the trail was tested against it.
        var binds = SQLBindings()
        var scope: [String] = []
        if let clientID { scope.append("client_id = \(binds.bind(clientID))") }
        if let since { scope.append("chain_key IN (SELECT chain_key FROM revoker.audit_events WHERE occurred_at >= \(binds.bind(since)))") }
        let coveredBind = binds.bind(covered)
        let openBind = binds.bind(open)
        let sql = binds.query(
            """
            WITH last AS (
                SELECT DISTINCT ON (chain_key) chain_key, chain_seq
                FROM revoker.audit_events
                \(scope.isEmpty ? "" : "WHERE " + scope.joined(separator: " AND "))
                ORDER BY chain_key, chain_seq DESC
            ), heads AS (
                SELECT * FROM revoker.audit_chains
                \(scope.isEmpty ? "" : "WHERE chain_key IN (SELECT chain_key FROM last)")
            ), joined AS (
                SELECT coalesce(h.chain_key, l.chain_key) AS chain, h.last_seq, h.last_hash, l.chain_seq AS last_seq_found,
                       h.archived_seq
                FROM heads h FULL JOIN last l ON l.chain_key = h.chain_key
                -- A chain archived up to its head has no row here to check it against (migration 0022).
                WHERE h.archived_seq IS NULL OR h.last_seq > h.archived_seq
            )
            SELECT j.chain, j.last_seq, j.last_seq_found, at_head.id, at_head.hash = j.last_hash, beyond.id
            FROM joined j
            LEFT JOIN LATERAL (
                -- LIMIT keeps it a lookup per chain: joined, the whole trail was hashed for a few chains.
                SELECT a.id, a.hash FROM revoker.audit_events a WHERE a.chain_key = j.chain AND a.chain_seq = j.last_seq LIMIT 1
            ) at_head ON true
            LEFT JOIN LATERAL (
                SELECT min(e.id) AS id FROM revoker.audit_events e
                WHERE e.chain_key = j.chain AND e.chain_seq > coalesce(j.last_seq, 0) AND e.txid < \(coveredBind)::xid8
                  AND e.txid <> ALL(\(openBind)::text[]::xid8[])
            ) beyond ON true
            WHERE j.last_seq_found IS NULL OR j.last_seq > j.last_seq_found
               OR (j.last_seq IS NOT NULL AND at_head.hash IS DISTINCT FROM j.last_hash) OR beyond.id IS NOT NULL
            ORDER BY 1
            """
        )
        // Compiling it (JIT, for the planner's guess of the chains in scope) took longer than running it.
        let found = try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SET LOCAL jit = off", logger: logger)
            return try await connection.query(sql, logger: logger).collect()
        }
        for row in found {
            let (chain, headSeq, lastSeq, headRow, sameHash, beyond) = try row.decode((String, Int64?, Int64?, Int64?, Bool?, Int64?).self)
            switch (headSeq, lastSeq) {
            case (let head?, nil):
                problems.append(Self.removedWhole(chain, head: head))
                continue
            case (let head?, let last?) where last < head:
                problems.append(Self.missingFromEnd(chain, last: last, head: head))
                continue
            case (let head?, _) where headRow == nil:
                problems.append(AuditProblem(.removed, "chain \(chain): its row #\(head), which its head records, is missing", chain: chain))
            case (let head?, _) where sameHash != true:
                problems.append(Self.headRewritten(chain, head: head, row: headRow))
            default:
                break
            }
            if let beyond { problems.append(Self.beyondHead(chain, row: beyond, head: headSeq)) }
        }
    }

    /// Recomputes each checkpoint's slice (row count and Merkle root) from every row, in scope or
    /// not, and rehashes the rows outside the scope, so that a row moved out of it (another app, an
    /// earlier time) is found; returns how many rows of the scope no checkpoint covers yet.
    private func checkSlices(_ checkpoints: [AuditCheckpoint], last: AuditCheckpoint?, scope: Scope) async throws -> Slices {
        var problems: [AuditProblem] = []
        var whole = WholeRead()
        let first = checkpoints.first
        let lowest = min(first?.txidFrom ?? last?.txidTo ?? 0, first?.lateTxids.first ?? .max, last?.openTxids.first ?? .max)
        let horizon =
            try await client.query("SELECT pg_snapshot_xmax(pg_current_snapshot())::text", logger: logger)
            .collect().first?.decode(String.self)
        let next = try horizon.map(AuditCheckpoints.txid) ?? UInt64.max
        var trees = Array(repeating: MerkleTree.Builder(), count: checkpoints.count)
        var pending = 0
        // What archives took (migration 0022): a checkpoint all archived is proven by its file; one
        // split keeps its archived leaves here, merged into its tree in id order.
        let archived = try await client.withConnection { try await AuditCheckpoints.archived(nil, on: $0, logger: self.logger) }
        let allArchived = checkpoints.map { archived[$0.seq].map { $0.leaves == nil } ?? false }
        let outside = checkpoints.map { archived[$0.seq]?.leaves ?? [] }
        var used = Array(repeating: 0, count: checkpoints.count)
        func addOutside(_ index: Int, before id: Int64) {
            while used[index] < outside[index].count, outside[index][used[index]].id < id {
                trees[index].append(outside[index][used[index]].hash)
                used[index] += 1
            }
        }
        // Looked up per row: copying checkpoints (with their lists) per row was an eighth of the run.
        let slices = AuditCheckpointSlices(checkpoints)
        let lastTxidTo = last?.txidTo
        let lastOpen = Set(last?.openTxids ?? [])
        let lastCreatedAt = last?.createdAtMicros
        // The whole trail is rehashed here, each row once; a part of it, along its chains first.
        let rows = try await client.query(
            scope.isWhole
                // By the column: the text "id" among the outputs would sort as text.
                ? "SELECT \(unescaped: Self.hashedColumns) FROM revoker.audit_events e ORDER BY e.id"
                : "SELECT \(unescaped: Self.rowColumns) FROM revoker.audit_events WHERE txid >= \(String(lowest))::xid8 ORDER BY id",
            logger: logger
        )
        for try await row in rows {
            let (id, txid, occurred, hash, client): (Int64, UInt64, Int64, [UInt8], String?)
            if scope.isWhole {
                (id, txid, occurred, hash) = try whole.read(row)
                client = nil
            } else {
                let (chainRow, previous, stored) = try Self.decodeRow(row)
                (id, txid, occurred, hash, client) = (chainRow.id, chainRow.txid, chainRow.occurredAtMicros, stored, chainRow.clientID)
                if !scope.contains(occurredAt: occurred, clientID: client), chainRow.hash(after: previous) != stored {
                    problems.append(
                        AuditProblem(
                            .changed,
                            "row \(id), outside this verification's scope, no longer gives its hash: changed, or moved out of the scope "
                                + "(to another app, or to an earlier time)",
                            rows: [id]
                        )
                    )
                }
            }
            if txid >= next {
                problems.append(
                    AuditProblem(.inserted, "row \(id) claims transaction \(txid), which has not started yet: forged", rows: [id])
                )
                continue
            }
            if let index = slices.slice(of: txid) {
                if allArchived[index] {
                    problems.append(
                        AuditProblem(
                            .inserted,
                            "row \(id) lies under checkpoint \(checkpoints[index].seq), whose rows were all archived: added since",
                            rows: [id],
                            checkpoint: checkpoints[index].seq
                        )
                    )
                    continue
                }
                addOutside(index, before: id)
                trees[index].append(hash)
                // A row taken late was written while an earlier checkpoint left its transaction open.
                if index > 0, !slices.late[index].contains(txid), occurred < slices.createdAt[index - 1] - Self.backdatingGrace {
                    problems.append(
                        AuditProblem(
                            .reordered,
                            "row \(id) claims to have occurred at \(Self.format(occurred)), before checkpoint "
                                + "\(checkpoints[index - 1].seq) that does not cover it: back-dated",
                            rows: [id],
                            checkpoint: checkpoints[index].seq
                        )
                    )
                }
                continue
            }
            // Under a checkpoint older than the scope: not checked here.
            guard lastTxidTo.map({ txid >= $0 || lastOpen.contains(txid) }) ?? true else { continue }
            if scope.contains(occurredAt: occurred, clientID: client) { pending += 1 }
            if let last, let lastCreatedAt, !lastOpen.contains(txid), occurred < lastCreatedAt - Self.backdatingGrace {
                problems.append(
                    AuditProblem(
                        .reordered,
                        "row \(id) claims to have occurred at \(Self.format(occurred)), before checkpoint \(last.seq) "
                            + "(\(Self.format(last.createdAtMicros))) that does not cover it: back-dated",
                        rows: [id]
                    )
                )
            }
        }
        for index in checkpoints.indices { addOutside(index, before: .max) }
        for (index, (checkpoint, tree)) in zip(checkpoints, trees).enumerated()
        where !allArchived[index] && (tree.count != checkpoint.rowCount || tree.root != checkpoint.merkleRoot) {
            let counted = Int64(tree.count)
            let how =
                counted < checkpoint.rowCount
                ? "\(checkpoint.rowCount - counted) of its \(checkpoint.rowCount) rows are missing"
                : counted > checkpoint.rowCount
                    ? "it holds \(counted - checkpoint.rowCount) rows more than the \(checkpoint.rowCount) it signed for"
                    : "its \(counted) rows are not the ones it signed for (changed)"
            problems.append(
                AuditProblem(
                    .checkpointMismatch,
                    "checkpoint \(checkpoint.seq) (\(Self.format(checkpoint.createdAtMicros))): \(how)",
                    checkpoint: checkpoint.seq
                )
            )
        }
        return Slices(pending: pending, problems: problems, changed: whole.changed, rows: whole.rows, chainsStartingAtOne: whole.firstRows)
    }

    /// What ``checkSlices(_:last:scope:)`` found: rows no checkpoint covers yet in the scope, its
    /// problems, and, for the whole trail, what rehashing each row found and counted.
    struct Slices {
        var pending: Int
        var problems: [AuditProblem]
        var changed: [AuditProblem]
        var rows: Int
        var chainsStartingAtOne: Int
    }

    static func format(_ micros: Int64) -> String {
        Date(timeIntervalSince1970: Double(micros) / 1_000_000).formatted(.iso8601)
    }
}
