import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// What the live trail recorded of each archive when it dropped its months (migrations 0022,
/// 0025), held against an archive file: the file is the only copy of those rows, and its own
/// signatures cannot show that it was cut and signed again with the same key.
public struct AuditArchiveRecords: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// What the trail recorded differs from `file` (as ``AuditArchive/verify(path:keys:)`` found
    /// it, with its bytes' SHA-256): the archive recorded with that SHA-256, else the one of its
    /// months. Empty when the file is the one recorded, its first and last checkpoint the ones
    /// the trail still holds.
    public func problems(of file: AuditArchive.Verification, sha256: [UInt8]) async throws -> [String] {
        let logger = self.logger
        return try await StoreDatabase.run(logger) {
            try await self.client.withConnection { connection in
                var problems: [String] = []
                var record = try await Self.record(sha256: sha256, on: connection, logger: logger)
                if record == nil {
                    record = try await Self.record(months: file.months, on: connection, logger: logger)
                    guard let record else {
                        return ["the trail recorded no archive with this file's SHA-256 (\(sha256.hex)), nor of its months"]
                    }
                    problems.append(
                        "the trail recorded the archive of \(record.months.joined(separator: ", ")) as \(record.fileName) with SHA-256 "
                            + "\(record.sha256.hex); this file's is \(sha256.hex): it is not the file written"
                    )
                }
                guard let record else { return problems }
                let found = file.extent
                let recorded: [(String, String, String)] = [
                    ("the months", record.months.joined(separator: ", "), file.months.joined(separator: ", ")),
                    ("the boundary (before)", AuditArchiver.format(record.before), file.before ?? "none"),
                    ("rows", String(record.rows), String(file.rows)),
                    ("the first row", record.firstID.map(String.init) ?? "none", found?.firstID.map(String.init) ?? "none"),
                    ("the last row", record.lastID.map(String.init) ?? "none", found?.lastID.map(String.init) ?? "none"),
                ]
                for (what, trail, here) in recorded where trail != here {
                    problems.append("the trail recorded \(what) \(trail) for archive \(record.fileName); the file holds \(here)")
                }
                // Archives recorded before 0025 name no checkpoints: their SHA-256 is the tie.
                let ends = [
                    ("first", record.firstCheckpoint, found?.firstCheckpoint, found?.firstCheckpointHash),
                    ("last", record.lastCheckpoint, found?.lastCheckpoint, found?.lastCheckpointHash),
                ]
                let seqs = ends.compactMap(\.1)
                guard !seqs.isEmpty else { return problems }
                let held = try await AuditCheckpoints.read(
                    "WHERE seq IN (\(seqs.map(String.init).joined(separator: ", ")))",
                    on: connection,
                    logger: logger
                )
                for (end, seq, fileSeq, fileHash) in ends {
                    guard let seq else { continue }
                    if seq != fileSeq {
                        problems.append(
                            "the trail recorded checkpoint \(seq) as archive \(record.fileName)'s \(end); the file's is \(fileSeq.map(String.init) ?? "none")"
                        )
                    } else if let checkpoint = held.first(where: { $0.seq == seq }), checkpoint.hash.hex != fileHash {
                        problems.append("checkpoint \(seq), the file's \(end), is not the trail's checkpoint \(seq)")
                    }
                }
                return problems
            }
        }
    }

    struct Record {
        var fileName: String
        var before: Date
        var months: [String]
        var sha256: [UInt8]
        var rows: Int64
        var firstID: Int64?
        var lastID: Int64?
        var firstCheckpoint: Int64?
        var lastCheckpoint: Int64?
    }

    static let columns = "file_name, before, months, file_sha256, row_count, first_id, last_id, first_checkpoint, last_checkpoint"

    /// The newest archive recorded with the file's SHA-256.
    static func record(sha256: [UInt8], on connection: PostgresConnection, logger: Logger) async throws -> Record? {
        try await first(
            connection.query(
                "SELECT \(unescaped: columns) FROM revoker.audit_archives WHERE file_sha256 = \(Data(sha256)) ORDER BY id DESC LIMIT 1",
                logger: logger
            )
        )
    }

    /// The newest archive recorded of any of `months`.
    static func record(months: [String], on connection: PostgresConnection, logger: Logger) async throws -> Record? {
        try await first(
            connection.query(
                "SELECT \(unescaped: columns) FROM revoker.audit_archives WHERE months && \(months) ORDER BY id DESC LIMIT 1",
                logger: logger
            )
        )
    }

    private static func first(_ rows: PostgresRowSequence) async throws -> Record? {
        for try await row in rows.decode((String, Date, [String], Data, Int64, Int64?, Int64?, Int64?, Int64?).self) {
            return Record(
                fileName: row.0,
                before: row.1,
                months: row.2,
                sha256: Array(row.3),
                rows: row.4,
                firstID: row.5,
                lastID: row.6,
                firstCheckpoint: row.7,
                lastCheckpoint: row.8
            )
        }
        return nil
    }
}
