-- 0010_google_security_events.sql: Google's Cross-Account Protection (RISC) security events.
--
-- As verified and accepted (append-only), de-duplicated by jti. google_user_id is the `sub` of
-- an iss-sub subject (NULL for token-revoked, whose subject is a token hash, and verification).
-- tokens-revoked and account-purged end the user's live Google requests for the app when they
-- arrive (in the receiving statement) and, for requests enqueued later, at their claim.
CREATE TABLE revoker.google_security_events (
    id             bigserial   PRIMARY KEY,
    jti            text        NOT NULL UNIQUE CHECK (char_length(jti) BETWEEN 1 AND 255),
    client_id      text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    audience       text        NOT NULL CHECK (char_length(audience) BETWEEN 1 AND 255),
    type           text        NOT NULL CHECK (type ~ '^[a-z][a-z0-9-]{0,63}$'),
    type_uri       text        NOT NULL CHECK (char_length(type_uri) BETWEEN 1 AND 255),
    google_user_id text        CHECK (char_length(google_user_id) BETWEEN 1 AND 255),
    reason         text        CHECK (char_length(reason) <= 64),
    issued_at      timestamptz NOT NULL,
    issuer         text        NOT NULL CHECK (char_length(issuer) BETWEEN 1 AND 255),
    key_id         text        NOT NULL CHECK (char_length(key_id) BETWEEN 1 AND 255),
    received_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX google_security_events_user ON revoker.google_security_events (client_id, google_user_id)
    WHERE type IN ('tokens-revoked', 'account-purged');
CREATE INDEX google_security_events_received ON revoker.google_security_events (received_at, id);

CREATE TRIGGER google_security_events_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.google_security_events
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER google_security_events_no_truncate
    BEFORE TRUNCATE ON revoker.google_security_events
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (type IN (
    'revocation.succeeded', 'revocation.failed', 'revocation.cancelled',
    'apple.consent_revoked', 'apple.account_deleted', 'apple.email_disabled', 'apple.email_enabled',
    'google.sessions_revoked', 'google.tokens_revoked', 'google.token_revoked', 'google.account_disabled',
    'google.account_enabled', 'google.account_purged', 'google.account_credential_change_required',
    'google.verification')) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

-- An accepted event of a documented type becomes `google.<type>` for the app backend.
CREATE FUNCTION revoker.outbox_google_security_event() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time, provider)
    VALUES ('google.' || replace(NEW.type, '-', '_'), NEW.client_id, NEW.google_user_id, NEW.jti, NEW.issued_at, 'google');
    RETURN NULL;
END;
$$;

CREATE TRIGGER google_security_events_outbox
    AFTER INSERT ON revoker.google_security_events
    FOR EACH ROW
    WHEN (NEW.type IN ('sessions-revoked', 'tokens-revoked', 'token-revoked', 'account-disabled', 'account-enabled',
                       'account-purged', 'account-credential-change-required', 'verification'))
    EXECUTE FUNCTION revoker.outbox_google_security_event();

REVOKE ALL ON FUNCTION revoker.outbox_google_security_event() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (10, '0010_google_security_events', NULL)
ON CONFLICT (version) DO NOTHING;
