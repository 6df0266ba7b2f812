import RevokerProvider

extension RevokerConfiguration {
    /// The keys of the configuration file beside the providers' (each plug-in's `fileKeys`).
    static let fileKeys: [String: SettingShape] = [
        "database_url": .secretString,
        "extra_trust_roots_file": .string,
        "sealing_keys_file": .string,
        "intake_keys_file": .string,
        "worker": .section([
            "concurrency": .integer, "batch_size": .integer, "lease_seconds": .number, "max_attempts": .integer,
            "poll_interval_seconds": .number, "retry_base_seconds": .number, "retry_cap_seconds": .number, "pause_probe_seconds": .number,
            "shutdown_grace_seconds": .number, "client_secret_lifetime_seconds": .number, "provider_timeout_seconds": .number,
            // The older name of provider_timeout_seconds, still read.
            "apple_timeout_seconds": .number,
            "max_requests_per_second": .number,
        ]),
        "http": .section([
            "host": .string, "port": .integer, "max_body_bytes": .integer, "header_timeout_seconds": .number, "body_timeout_seconds": .number,
            "idle_timeout_seconds": .number, "max_connections": .integer, "database_timeout_seconds": .number,
            "grant_exchange_wait_seconds": .number, "public_url": .string,
            "api_keys": .entries(["name": .string, "sha256": .string, "scopes": .strings, "client_ids": .strings]),
            "ui": .section(["enabled": .bool, "public_url": .string, "session_hours": .number, "idle_minutes": .number]),
        ]),
        "custody": .section(["validate_every_days": .number]),
        "webhooks": .entries(["name": .string, "url": .string, "secret_file": .string, "client_ids": .strings]),
        "webhook_delivery": .section([
            "timeout_seconds": .number, "retry_base_seconds": .number, "retry_cap_seconds": .number, "park_after_seconds": .number,
            "poll_interval_seconds": .number, "lease_seconds": .number, "drain_seconds": .number, "from_start": .bool,
        ]),
        "audit": .section([
            "signing_key_file": .string, "public_key_files": .strings, "checkpoint_interval_seconds": .number, "witness_path": .string,
        ]),
        "tracing": .section(TracingSettings.fileKeys),
    ]

    /// The variables of ``Variable`` and the keys they set.
    static let variables: [SettingVariable] =
        [
            .init(Variable.databaseURL, sets: "database_url", .secretString),
            .init(Variable.extraTrustRootsFile, sets: "extra_trust_roots_file"),
            // The keys themselves: only the environment may carry them, never the file.
            .init(Variable.sealingKeys, sets: "sealing_keys", .secretString),
            .init(Variable.sealingKeysFile, sets: "sealing_keys_file"),
            .init(Variable.intakeKeysFile, sets: "intake_keys_file"),
            .init(Variable.httpHost, sets: "http.host"),
            .init(Variable.httpPort, sets: "http.port", .integer),
            .init(Variable.auditSigningKeyFile, sets: "audit.signing_key_file"),
            .init(Variable.auditWitnessPath, sets: "audit.witness_path"),
        ] + TracingSettings.variables
}
