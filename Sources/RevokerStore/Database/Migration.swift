import Crypto
import Foundation
import Logging
import PostgresNIO
import RevokerEvidence

/// One numbered SQL migration (embedded from `Sources/RevokerStore/Migrations`, which the
/// repository's `migrations/` links to).
public struct Migration: Sendable, Hashable {
    /// Version number (the file's numeric prefix).
    public var version: Int
    /// File name without `.sql`.
    public var name: String
    /// The SQL text.
    public var sql: String

    /// sha256 (hex) of the file's bytes.
    public var checksum: String {
        SHA256.hash(data: Array(self.sql.utf8)).hex
    }

    /// Creates a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// The migrations built into this binary, in order. Adding a file to `migrations/` needs a
    /// line here (SwiftPM names the embedded bytes after the file, with a leading digit
    /// replaced by `_`); the test `everyMigrationFileIsEmbedded` fails until it is added.
    public static let all: [Migration] = [
        Migration(version: 1, name: "0001_revocation_queue", sql: String(decoding: PackageResources._001_revocation_queue_sql, as: UTF8.self)),
        Migration(
            version: 2,
            name: "0002_new_revocation_limits",
            sql: String(decoding: PackageResources._002_new_revocation_limits_sql, as: UTF8.self)
        ),
        Migration(
            version: 3,
            name: "0003_sql_path_hardening",
            sql: String(decoding: PackageResources._003_sql_path_hardening_sql, as: UTF8.self)
        ),
        Migration(
            version: 4,
            name: "0004_notifications_and_events",
            sql: String(decoding: PackageResources._004_notifications_and_events_sql, as: UTF8.self)
        ),
        Migration(
            version: 5,
            name: "0005_webhook_deliveries",
            sql: String(decoding: PackageResources._005_webhook_deliveries_sql, as: UTF8.self)
        ),
        Migration(version: 6, name: "0006_audit_chain", sql: String(decoding: PackageResources._006_audit_chain_sql, as: UTF8.self)),
        Migration(
            version: 7,
            name: "0007_audit_chain_cost",
            sql: String(decoding: PackageResources._007_audit_chain_cost_sql, as: UTF8.self)
        ),
        Migration(version: 8, name: "0008_ui_sessions", sql: String(decoding: PackageResources._008_ui_sessions_sql, as: UTF8.self)),
        Migration(version: 9, name: "0009_providers", sql: String(decoding: PackageResources._009_providers_sql, as: UTF8.self)),
        Migration(
            version: 10,
            name: "0010_security_events",
            sql: String(decoding: PackageResources._010_security_events_sql, as: UTF8.self)
        ),
        Migration(version: 11, name: "0011_worker_liveness", sql: String(decoding: PackageResources._011_worker_liveness_sql, as: UTF8.self)),
        Migration(
            version: 12,
            name: "0012_worker_call_rates",
            sql: String(decoding: PackageResources._012_worker_call_rates_sql, as: UTF8.self)
        ),
        Migration(version: 13, name: "0013_audit_witnesses", sql: String(decoding: PackageResources._013_audit_witnesses_sql, as: UTF8.self)),
        Migration(version: 14, name: "0014_grant_custody", sql: String(decoding: PackageResources._014_grant_custody_sql, as: UTF8.self)),
        Migration(
            version: 15,
            name: "0015_account_deletions",
            sql: String(decoding: PackageResources._015_account_deletions_sql, as: UTF8.self)
        ),
        Migration(
            version: 16,
            name: "0016_grant_validation",
            sql: String(decoding: PackageResources._016_grant_validation_sql, as: UTF8.self)
        ),
        Migration(
            version: 17,
            name: "0017_audit_history_clock",
            sql: String(decoding: PackageResources._017_audit_history_clock_sql, as: UTF8.self)
        ),
        Migration(version: 18, name: "0018_years_of_data", sql: String(decoding: PackageResources._018_years_of_data_sql, as: UTF8.self)),
        Migration(version: 19, name: "0019_kept_counts", sql: String(decoding: PackageResources._019_kept_counts_sql, as: UTF8.self)),
        Migration(
            version: 20,
            name: "0020_audit_partitions",
            sql: String(decoding: PackageResources._020_audit_partitions_sql, as: UTF8.self)
        ),
        Migration(version: 21, name: "0021_trace_context", sql: String(decoding: PackageResources._021_trace_context_sql, as: UTF8.self)),
        Migration(
            version: 22,
            name: "0022_audit_archives",
            sql: String(decoding: PackageResources._022_audit_archives_sql, as: UTF8.self)
        ),
        Migration(
            version: 23,
            name: "0023_grants_by_proof",
            sql: String(decoding: PackageResources._023_grants_by_proof_sql, as: UTF8.self)
        ),
        Migration(
            version: 24,
            name: "0024_deletions_at_any_size",
            sql: String(decoding: PackageResources._024_deletions_at_any_size_sql, as: UTF8.self)
        ),
        Migration(
            version: 25,
            name: "0025_archive_extent",
            sql: String(decoding: PackageResources._025_archive_extent_sql, as: UTF8.self)
        ),
        Migration(
            version: 26,
            name: "0026_provider_messages",
            sql: String(decoding: PackageResources._026_provider_messages_sql, as: UTF8.self)
        ),
        Migration(
            version: 27,
            name: "0027_lost_writes",
            sql: String(decoding: PackageResources._027_lost_writes_sql, as: UTF8.self)
        ),
        Migration(
            version: 28,
            name: "0028_grants_of_any_token",
            sql: String(decoding: PackageResources._028_grants_of_any_token_sql, as: UTF8.self)
        ),
        Migration(
            version: 29,
            name: "0029_erasure_requests",
            sql: String(decoding: PackageResources._029_erasure_requests_sql, as: UTF8.self)
        ),
    ]
}
