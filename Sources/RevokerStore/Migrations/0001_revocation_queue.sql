-- 0001_revocation_queue.sql: the revocation queue, credential intake, app pauses and the
-- append-only audit trail. Everything lives in schema `revoker`.
--
-- Applied by `revoker migrate` (which embeds this very file and records it with its
-- checksum in revoker.schema_migrations), or by hand, in order, with
--     psql --single-transaction -v ON_ERROR_STOP=1 -f migrations/0001_revocation_queue.sql
-- The last statement records the version with a NULL checksum when applied by psql; the
-- binary adopts such rows (fills in the checksum) the next time it migrates.
--
-- Requires PostgreSQL 13 or later (gen_random_uuid() and sha256() are built in).

CREATE SCHEMA IF NOT EXISTS revoker;

CREATE TABLE IF NOT EXISTS revoker.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- ---------------------------------------------------------------------------------------
-- Requests
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.revocation_requests (
    id                       uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    client_id                text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    external_reference       text        NOT NULL CHECK (char_length(external_reference) BETWEEN 1 AND 255),
    apple_user_id            text        CHECK (char_length(apple_user_id) BETWEEN 1 AND 255),
    -- What the stored credential currently is (a code becomes a refresh token after the exchange).
    credential_kind          text        NOT NULL
        CHECK (credential_kind IN ('authorization_code', 'refresh_token', 'access_token')),
    -- What was enqueued; together with credential_digest it decides whether a replay conflicts.
    enqueued_kind            text        NOT NULL
        CHECK (enqueued_kind IN ('authorization_code', 'refresh_token', 'access_token')),
    -- AES-GCM sealed credential (see CredentialSealer) and the id of the key that sealed it.
    sealed_credential        bytea,
    credential_key_id        text,
    -- sha256 of the UTF-8 bytes of the credential as enqueued (never erased; not reversible
    -- for the high-entropy tokens Apple issues).
    credential_digest        bytea       NOT NULL CHECK (octet_length(credential_digest) = 32),
    redirect_uri             text        CHECK (char_length(redirect_uri) BETWEEN 1 AND 2048),
    state                    text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    outcome                  text
        CHECK (outcome IN ('revoked', 'already_invalid', 'code_rejected', 'subject_mismatch',
                           'exhausted', 'client_misconfigured', 'rejected', 'cancelled')),
    attempts                 integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts             integer     NOT NULL DEFAULT 8 CHECK (max_attempts BETWEEN 1 AND 1000),
    run_after                timestamptz NOT NULL DEFAULT now(),
    lease_owner              text        CHECK (char_length(lease_owner) BETWEEN 1 AND 200),
    lease_expires_at         timestamptz,
    fencing_token            bigint      NOT NULL DEFAULT 0,
    last_error_code          text        CHECK (char_length(last_error_code) <= 100),
    last_error_description   text        CHECK (char_length(last_error_description) <= 500),
    requeued_from            uuid,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    finished_at              timestamptz,

    CONSTRAINT revocation_requests_sealed_with_key
        CHECK ((sealed_credential IS NULL) = (credential_key_id IS NULL)),
    CONSTRAINT revocation_requests_lease_iff_running
        CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT revocation_requests_outcome_matches_state CHECK (
           (state IN ('pending', 'running') AND outcome IS NULL AND finished_at IS NULL)
        OR (state = 'succeeded' AND outcome IN ('revoked', 'already_invalid') AND finished_at IS NOT NULL)
        OR (state = 'failed' AND outcome IN ('code_rejected', 'subject_mismatch', 'exhausted',
                                             'client_misconfigured', 'rejected') AND finished_at IS NOT NULL)
        OR (state = 'cancelled' AND outcome = 'cancelled' AND finished_at IS NOT NULL)),
    -- Final requests hold no credential, with one exception: a request that failed because
    -- of *our* configuration (client_misconfigured) keeps its sealed credential until it is
    -- requeued (revoker.requeue... / RevocationQueue.requeueConfigurationFailures) or pruned.
    CONSTRAINT revocation_requests_final_erased CHECK (
        state IN ('pending', 'running')
        OR sealed_credential IS NULL
        OR (state = 'failed' AND outcome = 'client_misconfigured'))
);

-- One live (pending/running) request per (client_id, external_reference); enqueue relies
-- on it with INSERT ... ON CONFLICT.
CREATE UNIQUE INDEX revocation_requests_one_live
    ON revoker.revocation_requests (client_id, external_reference)
    WHERE state IN ('pending', 'running');

-- Claiming: authorization codes first (they die after five minutes), then oldest due.
-- The ORDER BY of the claim query matches this expression exactly.
CREATE INDEX revocation_requests_claim
    ON revoker.revocation_requests ((credential_kind <> 'authorization_code'), run_after, id)
    WHERE state = 'pending';

CREATE INDEX revocation_requests_lease_expiry
    ON revoker.revocation_requests (lease_expires_at)
    WHERE state = 'running';

CREATE INDEX revocation_requests_finished
    ON revoker.revocation_requests (finished_at)
    WHERE finished_at IS NOT NULL;

CREATE INDEX revocation_requests_reference
    ON revoker.revocation_requests (client_id, external_reference, created_at);

CREATE INDEX revocation_requests_apple_user
    ON revoker.revocation_requests (apple_user_id, created_at)
    WHERE apple_user_id IS NOT NULL;

CREATE INDEX revocation_requests_created
    ON revoker.revocation_requests (created_at, id);

-- ---------------------------------------------------------------------------------------
-- Credential intake (the SQL enqueue path)
--
-- revoker.enqueue_revocation() runs inside the caller's transaction and has no access to
-- the AES key (the key never reaches the database), so it cannot seal. It stores the
-- credential here, in plaintext, in a table only the owner and revoker_worker can read
-- (see deploy/postgres/roles.sql). The worker moves it into sealed_credential at the
-- latest in the transaction that claims the request, and RevocationQueue.sealIntake()
-- (run on every wake-up) seals all intake rows earlier. Consequences:
--   * plaintext exists at rest from the caller's COMMIT until the next worker pass;
--   * the plaintext is also written to the WAL (and so to WAL archives, base backups
--     taken meanwhile and streaming replicas); deleting the intake row does not remove
--     it from there. Use the Swift/HTTP enqueue paths where that matters;
--   * once deleted, the row's space is reclaimed by VACUUM, not immediately zeroed.
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.credential_intake (
    request_id  uuid        PRIMARY KEY
        REFERENCES revoker.revocation_requests (id) ON DELETE CASCADE,
    credential  text        NOT NULL CHECK (char_length(credential) BETWEEN 1 AND 8192),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- ---------------------------------------------------------------------------------------
-- App pauses: apps whose requests are not claimed because of a configuration fault.
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.app_pauses (
    client_id          text        PRIMARY KEY CHECK (char_length(client_id) BETWEEN 1 AND 255),
    reason_code        text        NOT NULL CHECK (char_length(reason_code) BETWEEN 1 AND 100),
    reason_description text        CHECK (char_length(reason_description) <= 500),
    paused_at          timestamptz NOT NULL DEFAULT now(),
    next_probe_at      timestamptz NOT NULL
);

-- ---------------------------------------------------------------------------------------
-- Audit trail (append-only). No foreign key to revocation_requests: pruning requests must
-- never touch the trail, and the trail must outlive the requests it describes.
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.audit_events (
    id                      bigserial   PRIMARY KEY,
    occurred_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    request_id              uuid,
    client_id               text        CHECK (char_length(client_id) <= 255),
    external_reference      text        CHECK (char_length(external_reference) <= 255),
    apple_user_id           text        CHECK (char_length(apple_user_id) <= 255),
    event                   text        NOT NULL CHECK (event IN (
        'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
        'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
        'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
        'app_paused', 'app_resumed', 'apple_error', 'note')),
    attempt                 integer     CHECK (attempt >= 0),
    actor                   text        NOT NULL CHECK (char_length(actor) BETWEEN 1 AND 200),
    apple_endpoint          text        CHECK (char_length(apple_endpoint) <= 200),
    http_status             integer     CHECK (http_status BETWEEN 100 AND 599),
    apple_error             text        CHECK (char_length(apple_error) <= 100),
    apple_error_description text        CHECK (char_length(apple_error_description) <= 500),
    latency_ms              integer     CHECK (latency_ms >= 0),
    detail                  text        CHECK (char_length(detail) <= 500)
);

CREATE INDEX audit_events_occurred ON revoker.audit_events (occurred_at, id);
CREATE INDEX audit_events_request ON revoker.audit_events (request_id, occurred_at, id);
CREATE INDEX audit_events_reference ON revoker.audit_events (external_reference, occurred_at, id);
CREATE INDEX audit_events_client ON revoker.audit_events (client_id, occurred_at, id);
CREATE INDEX audit_events_apple_user ON revoker.audit_events (apple_user_id, occurred_at, id)
    WHERE apple_user_id IS NOT NULL;

-- Append-only, enforced for everyone who does not disable triggers (the table owner could
-- `ALTER TABLE ... DISABLE TRIGGER`; run the service as a role that does not own the
-- schema, see deploy/postgres/roles.sql, to close that door too).
CREATE FUNCTION revoker.audit_events_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'revoker.audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'RV403';
END;
$$;

CREATE TRIGGER audit_events_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.audit_events
    FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_refuse_change();

CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON revoker.audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change();

-- ---------------------------------------------------------------------------------------
-- Wake-up: one notification per INSERT statement (not per row), so bulk inserts do not
-- storm listeners; PostgreSQL also folds identical notifications within a transaction.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.notify_revocation_requests() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('revoker_requests', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_notify
    AFTER INSERT ON revoker.revocation_requests
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.notify_revocation_requests();

-- ---------------------------------------------------------------------------------------
-- SQL enqueue: call inside your own transaction, e.g. together with the user's deletion:
--     SELECT revoker.enqueue_revocation('com.example.app', 'user-42',
--                                       'refresh_token', $token, apple_user_id => '000123.abc');
-- Same rules as RevocationQueue.enqueue: a replay for a live request with the same
-- credential returns the existing id; a different credential or kind raises SQLSTATE RV409.
-- SECURITY DEFINER with a fixed search_path: callers need only EXECUTE (revoker_enqueuer).
-- The credential goes to revoker.credential_intake; read the note above that table.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.enqueue_revocation(
    client_id          text,
    external_reference text,
    credential_kind    text,
    credential         text,
    apple_user_id      text    DEFAULT NULL,
    redirect_uri       text    DEFAULT NULL,
    max_attempts       integer DEFAULT NULL
) RETURNS uuid
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_id       uuid;
    v_digest   bytea;
    v_existing record;
BEGIN
    IF credential IS NULL OR credential = '' THEN
        RAISE EXCEPTION 'credential must not be empty' USING ERRCODE = '22023';
    END IF;
    IF credential_kind IS NULL
       OR credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'unknown credential kind' USING ERRCODE = '22023';
    END IF;
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(credential, 'UTF8'));

    FOR attempt IN 1..10 LOOP
        INSERT INTO revoker.revocation_requests AS r
            (client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, redirect_uri, max_attempts)
        VALUES
            (enqueue_revocation.client_id, enqueue_revocation.external_reference,
             enqueue_revocation.apple_user_id, enqueue_revocation.credential_kind,
             enqueue_revocation.credential_kind, v_digest, enqueue_revocation.redirect_uri,
             coalesce(enqueue_revocation.max_attempts, 8))
        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running')
            DO NOTHING
        RETURNING r.id INTO v_id;

        IF v_id IS NOT NULL THEN
            INSERT INTO revoker.credential_intake (request_id, credential)
            VALUES (v_id, enqueue_revocation.credential);
            INSERT INTO revoker.audit_events
                (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
            VALUES
                (v_id, enqueue_revocation.client_id, enqueue_revocation.external_reference,
                 enqueue_revocation.apple_user_id, 'enqueued', 0,
                 'sql:' || left(session_user::text, 190), 'kind=' || enqueue_revocation.credential_kind);
            RETURN v_id;
        END IF;

        SELECT r.id, r.enqueued_kind, r.credential_digest
          INTO v_existing
          FROM revoker.revocation_requests r
         WHERE r.client_id = enqueue_revocation.client_id
           AND r.external_reference = enqueue_revocation.external_reference
           AND r.state IN ('pending', 'running');
        IF FOUND THEN
            IF v_existing.enqueued_kind <> enqueue_revocation.credential_kind
               OR v_existing.credential_digest <> v_digest THEN
                RAISE EXCEPTION 'a live revocation request for this external reference has a different credential'
                    USING ERRCODE = 'RV409';
            END IF;
            RETURN v_existing.id;
        END IF;
        -- The conflicting request finished between the INSERT and the SELECT: try again.
    END LOOP;
    RAISE EXCEPTION 'could not enqueue: the live request kept changing' USING ERRCODE = '40001';
END;
$$;

-- Functions are executable by PUBLIC by default; this one must not be.
REVOKE ALL ON FUNCTION revoker.enqueue_revocation(text, text, text, text, text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.audit_events_refuse_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.notify_revocation_requests() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (1, '0001_revocation_queue', NULL)
ON CONFLICT (version) DO NOTHING;
