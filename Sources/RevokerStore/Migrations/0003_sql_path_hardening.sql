-- Revoker schema, migration 0003: the SQL enqueue path keeps the API's rules and never holds a
-- plaintext credential at rest, and audit rows cannot be forged by the roles that write them.
--
--   * revoker.apps: the client_ids revoker.enqueue_revocation accepts. `revoker migrate`,
--     `serve`, `work` and `drain` keep it equal to their configuration's apps.
--   * revoker.intake_keys: the public halves of the intake keys (RSA, OpenPGP) that
--     `migrate`, `serve`, `work` and `drain` publish; the workers hold the private halves.
--     revoker.enqueue_revocation encrypts the credential to the current one with pgcrypto, so
--     the intake table, the WAL and backups only ever see ciphertext.
--   * Identifiers follow NewRevocation's visible-text rule (an explicit list of refused
--     characters; a test holds this file and the Swift list equal).
--   * audit_events: the database assigns id, occurred_at and recorded_by (the session's role)
--     whatever an INSERT says, and an actor 'sql:<role>' must name the inserting role.
--
-- pgcrypto is a trusted extension: the schema owner needs CREATE on the database (a database
-- owner has it). Where pgcrypto is already installed, in any schema, that copy is used.
-- Applied by `revoker migrate`, or with psql after 0002.

CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA revoker;

-- ---------------------------------------------------------------------------------------
-- Registered apps
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.apps (
    client_id     text        PRIMARY KEY CHECK (char_length(client_id) BETWEEN 1 AND 255),
    registered_at timestamptz NOT NULL DEFAULT now()
);

-- Apps that already have requests stay accepted until a configuration says otherwise.
INSERT INTO revoker.apps (client_id)
SELECT DISTINCT client_id FROM revoker.revocation_requests
ON CONFLICT (client_id) DO NOTHING;

-- ---------------------------------------------------------------------------------------
-- Intake keys, and an intake that holds ciphertext
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.intake_keys (
    key_id       text        PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{16}$'),
    public_key   bytea       NOT NULL CHECK (octet_length(public_key) BETWEEN 64 AND 4096),
    is_current   boolean     NOT NULL DEFAULT false,
    published_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX intake_keys_one_current ON revoker.intake_keys (is_current) WHERE is_current;

-- Rows written before 0003 keep their plaintext until a worker seals them, as before.
ALTER TABLE revoker.credential_intake
    ALTER COLUMN credential DROP NOT NULL,
    ADD COLUMN key_id text,
    ADD COLUMN sealed bytea CHECK (octet_length(sealed) <= 16384),
    ADD CONSTRAINT credential_intake_one_form
        CHECK ((credential IS NULL) <> (sealed IS NULL) AND (sealed IS NULL) = (key_id IS NULL));

-- Encrypts to an intake key with pgcrypto, wherever pgcrypto is installed.
DO $migration$
DECLARE
    v_schema text;
BEGIN
    SELECT n.nspname INTO STRICT v_schema
      FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pgcrypto';
    EXECUTE pg_catalog.format($function$
        CREATE FUNCTION revoker.seal_for_intake(credential text, public_key bytea) RETURNS bytea
            LANGUAGE sql
            VOLATILE STRICT
            SET search_path = pg_catalog, pg_temp
        AS $body$
            SELECT %I.pgp_pub_encrypt_bytea(pg_catalog.convert_to(credential, 'UTF8'), public_key,
                                            'cipher-algo=aes256, compress-algo=0')
        $body$
    $function$, v_schema);
END;
$migration$;

-- NewRevocation.isVisibleText: no refused character anywhere, no white space at either end.
-- A pure function, so it may stay executable by PUBLIC.
CREATE FUNCTION revoker.is_visible_text(value text) RETURNS boolean
    LANGUAGE plpgsql
    IMMUTABLE STRICT
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- NewRevocation.refusedCharacters and NewRevocation.edgeWhiteSpace.
    v_refused  constant text := E'[\\u0001-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\ufeff\\ufff9-\\ufffb\\ue000-\\uf8ff]';
    v_edge     constant text := E'[\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]';
BEGIN
    RETURN value !~ v_refused AND value !~ ('^' || v_edge) AND value !~ (v_edge || '$');
END;
$$;

-- ---------------------------------------------------------------------------------------
-- SQL enqueue: the rules of NewRevocation, registered apps only, ciphertext only.
-- The same signature, so grants (EXECUTE for revoker_worker and revoker_enqueuer) and the
-- REVOKE from PUBLIC stay as they are.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.enqueue_revocation(
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
    v_key      record;
    v_visible  constant text := ' characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space';
BEGIN
    IF enqueue_revocation.client_id IS NULL
       OR char_length(enqueue_revocation.client_id) NOT BETWEEN 1 AND 255
       OR NOT revoker.is_visible_text(enqueue_revocation.client_id) THEN
        RAISE EXCEPTION 'client_id must be 1 to 255%', v_visible USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.external_reference IS NULL
       OR char_length(enqueue_revocation.external_reference) NOT BETWEEN 1 AND 255
       OR NOT revoker.is_visible_text(enqueue_revocation.external_reference) THEN
        RAISE EXCEPTION 'external_reference must be 1 to 255%', v_visible USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.apple_user_id IS NOT NULL
       AND (char_length(enqueue_revocation.apple_user_id) NOT BETWEEN 1 AND 255
            OR NOT revoker.is_visible_text(enqueue_revocation.apple_user_id)) THEN
        RAISE EXCEPTION 'apple_user_id must be 1 to 255%', v_visible USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.credential IS NULL
       OR octet_length(enqueue_revocation.credential) NOT BETWEEN 1 AND 8192
       OR enqueue_revocation.credential !~ '^[!-~]+$' THEN
        RAISE EXCEPTION 'credential must be 8192 bytes at most of printable ASCII without spaces' USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.credential_kind IS NULL
       OR enqueue_revocation.credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code, refresh_token or access_token' USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.redirect_uri IS NOT NULL
       AND (char_length(enqueue_revocation.redirect_uri) NOT BETWEEN 1 AND 2048
            OR enqueue_revocation.redirect_uri ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
            OR enqueue_revocation.redirect_uri !~* '^https?://[^/?#[:space:]]+') THEN
        RAISE EXCEPTION 'redirect_uri must be an absolute http(s) URL of at most 2048 characters' USING ERRCODE = '22023';
    END IF;
    IF coalesce(enqueue_revocation.max_attempts, 8) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 100' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM revoker.apps a WHERE a.client_id = enqueue_revocation.client_id) THEN
        RAISE EXCEPTION 'client_id must name an app Revoker is configured for (revoker.apps)' USING ERRCODE = '22023';
    END IF;
    SELECT k.key_id, k.public_key INTO v_key FROM revoker.intake_keys k WHERE k.is_current;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no intake key is published: configure intake_keys_file and start Revoker (or run revoker migrate)'
            USING ERRCODE = '55000';
    END IF;
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(enqueue_revocation.credential, 'UTF8'));

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
            INSERT INTO revoker.credential_intake (request_id, key_id, sealed)
            VALUES (v_id, v_key.key_id, revoker.seal_for_intake(enqueue_revocation.credential, v_key.public_key));
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

-- ---------------------------------------------------------------------------------------
-- Audit rows: the database stamps them
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.audit_events ADD COLUMN recorded_by text;

CREATE FUNCTION revoker.audit_events_stamp() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.id := nextval('revoker.audit_events_id_seq');
    NEW.occurred_at := clock_timestamp();
    NEW.recorded_by := session_user;
    IF NEW.actor LIKE 'sql:%' AND NEW.actor <> 'sql:' || left(session_user::text, 190) THEN
        RAISE EXCEPTION 'an audit actor sql:<role> must name the role that writes it' USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER audit_events_stamp
    BEFORE INSERT ON revoker.audit_events
    FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_stamp();

REVOKE ALL ON FUNCTION revoker.seal_for_intake(text, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.audit_events_stamp() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (3, '0003_sql_path_hardening', NULL)
ON CONFLICT (version) DO NOTHING;
