-- 0008_ui_sessions.sql: sessions of the compliance pages (/ui/ of `revoker serve`).
--
-- A session is held by a random token in an HttpOnly cookie; only its SHA-256 is stored, so
-- neither a copy of this table nor a backup lets anyone sign in. The API key that opened it
-- is named by the SHA-256 the configuration holds for it (never the key), so that a key
-- removed from the configuration or losing audit:read ends its sessions at the next request.
-- Every serving process reads the same table: a load balancer may send each page anywhere.
CREATE TABLE revoker.ui_sessions (
    token_hash   bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    key_name     text        NOT NULL CHECK (char_length(key_name) BETWEEN 1 AND 200),
    key_sha256   bytea       NOT NULL CHECK (octet_length(key_sha256) = 32),
    csrf_token   text        NOT NULL CHECK (char_length(csrf_token) BETWEEN 32 AND 100),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    CONSTRAINT ui_sessions_expiry CHECK (expires_at > created_at)
);

CREATE INDEX ui_sessions_expires ON revoker.ui_sessions (expires_at);

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (8, '0008_ui_sessions', NULL)
ON CONFLICT (version) DO NOTHING;
