-- 0014_grant_custody.sql: Revoker holds each grant from sign-in (custody).
--
-- An app backend registers the grant when the user signs in: an authorization code, exchanged
-- at once (it dies after five minutes), or a refresh token it already has. What is held is the
-- refresh token, sealed, under the app's own account reference, until the account is deleted
-- or the grant dies. Taking a grant into custody is a request of its own (purpose 'hold'): the
-- queue's leases, fencing, retries, rate limits and audit trail carry it as they carry a
-- revocation, and a code is claimed ahead of everything else as every code is.

-- ---------------------------------------------------------------------------------------
-- Apps: which provider each belongs to, so the SQL functions serve every provider.
-- NULL is a row published before providers existed: Apple's.
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.apps ADD COLUMN provider text CHECK (provider ~ '^[a-z][a-z0-9_]{0,31}$');

-- ---------------------------------------------------------------------------------------
-- Grants
--   pending  registered; its code is being exchanged (or, from SQL, its token sealed)
--   held     its refresh token is sealed here
--   revoking a deletion's revocation request is working on it
--   revoked  revoked by a deletion
--   dead     the provider says it is gone (the user revoked consent, deleted the account, or the
--            token was found invalid): nothing left to revoke
--   failed   never held: the code was refused, lost, another user's, or attempts ran out
-- end_reason says why a grant ended (a request outcome or the notification's type).
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.grants (
    id                uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    provider          text        NOT NULL CHECK (provider ~ '^[a-z][a-z0-9_]{0,31}$'),
    client_id         text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    account_reference text        NOT NULL CHECK (char_length(account_reference) BETWEEN 1 AND 255),
    -- The user's id at the provider (`sub`) and how it is known.
    user_id           text        CHECK (char_length(user_id) BETWEEN 1 AND 255),
    user_source       text        CHECK (user_source IN ('verified_id_token', 'stated')),
    registered_kind   text        NOT NULL CHECK (registered_kind IN ('authorization_code', 'refresh_token')),
    -- sha256 of the code or token as registered: registering it again finds this grant.
    registered_digest bytea       NOT NULL CHECK (octet_length(registered_digest) = 32),
    state             text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'held', 'revoking', 'revoked', 'dead', 'failed')),
    end_reason        text        CHECK (char_length(end_reason) BETWEEN 1 AND 100),
    -- The refresh token, sealed with AES-GCM bound to this grant's id (CredentialSealer).
    sealed_token      bytea,
    token_key_id      text,
    -- The request that took it into custody, and the one revoking it.
    hold_request_id   uuid,
    revoke_request_id uuid,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    held_at           timestamptz,
    ended_at          timestamptz,

    CONSTRAINT grants_sealed_with_key CHECK ((sealed_token IS NULL) = (token_key_id IS NULL)),
    CONSTRAINT grants_user_source CHECK ((user_id IS NULL) = (user_source IS NULL)),
    CONSTRAINT grants_held_holds CHECK (state NOT IN ('held', 'revoking') OR (sealed_token IS NOT NULL AND held_at IS NOT NULL)),
    -- An ended grant keeps nothing secret.
    CONSTRAINT grants_ended_erased CHECK (
        (state IN ('pending', 'held', 'revoking') AND ended_at IS NULL AND end_reason IS NULL)
        OR (state IN ('revoked', 'dead', 'failed') AND sealed_token IS NULL AND ended_at IS NOT NULL AND end_reason IS NOT NULL)),
    CONSTRAINT grants_registered_once UNIQUE (client_id, registered_digest)
);

CREATE INDEX grants_account ON revoker.grants (account_reference, created_at, id);
CREATE INDEX grants_user ON revoker.grants (provider, client_id, user_id) WHERE state IN ('pending', 'held', 'revoking');
CREATE INDEX grants_created ON revoker.grants (created_at, id);

-- ---------------------------------------------------------------------------------------
-- Requests: a purpose and the grant they work on.
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.revocation_requests
    ADD COLUMN purpose  text NOT NULL DEFAULT 'revoke' CHECK (purpose IN ('revoke', 'hold')),
    ADD COLUMN grant_id uuid REFERENCES revoker.grants (id);

CREATE INDEX revocation_requests_grant ON revoker.revocation_requests (grant_id) WHERE grant_id IS NOT NULL;

-- A grant's requests carry the account reference as their external reference (the trail and the
-- search find them by it), and an account may have several grants in flight: the one-live rule
-- holds for requests without a grant, and one live request per grant.
DROP INDEX revoker.revocation_requests_one_live;
CREATE UNIQUE INDEX revocation_requests_one_live
    ON revoker.revocation_requests (client_id, external_reference)
    WHERE state IN ('pending', 'running') AND grant_id IS NULL;
CREATE UNIQUE INDEX revocation_requests_one_live_per_grant
    ON revoker.revocation_requests (grant_id)
    WHERE state IN ('pending', 'running') AND grant_id IS NOT NULL;

-- held: a hold request took its grant into custody (state succeeded).
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_check
    CHECK (outcome IN ('revoked', 'already_invalid', 'revoked_by_user', 'held', 'code_rejected', 'exchange_lost',
                       'subject_mismatch', 'exhausted', 'client_misconfigured', 'rejected', 'cancelled')) NOT VALID;
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_matches_state;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_matches_state CHECK (
       (state IN ('pending', 'running') AND outcome IS NULL AND finished_at IS NULL)
    OR (state = 'succeeded' AND outcome IN ('revoked', 'already_invalid', 'revoked_by_user', 'held') AND finished_at IS NOT NULL)
    OR (state = 'failed' AND outcome IN ('code_rejected', 'exchange_lost', 'subject_mismatch', 'exhausted',
                                         'client_misconfigured', 'rejected') AND finished_at IS NOT NULL)
    OR (state = 'cancelled' AND outcome = 'cancelled' AND finished_at IS NOT NULL)) NOT VALID;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_purpose_outcome
    CHECK ((outcome = 'held') <= (purpose = 'hold') AND (purpose = 'hold') <= (grant_id IS NOT NULL)) NOT VALID;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_matches_state;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_purpose_outcome;

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event', 'checkpoint_refused', 'grant_registered', 'grant_held')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

-- ---------------------------------------------------------------------------------------
-- A hold request that ends without taking its grant in fails the grant, in the same
-- transaction, whichever way it ended (worker, operator, cancel). A grant already held (a
-- late finisher's refusal of a code another attempt exchanged) stays held.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.grants_hold_ended() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE revoker.grants g
    SET state = 'failed', end_reason = NEW.outcome, ended_at = now(), updated_at = now()
    WHERE g.id = NEW.grant_id AND g.state = 'pending';
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_hold_ended
    AFTER UPDATE ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (NEW.purpose = 'hold' AND OLD.state IN ('pending', 'running')
          AND NEW.state IN ('succeeded', 'failed', 'cancelled') AND NEW.outcome <> 'held')
    EXECUTE FUNCTION revoker.grants_hold_ended();

-- ---------------------------------------------------------------------------------------
-- Events: a hold request's end is told as the grant's (grant.held, grant.failed), not as a
-- revocation's.
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.outbox_events ADD COLUMN grant_id uuid;
ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (type IN (
    'revocation.succeeded', 'revocation.failed', 'revocation.cancelled',
    'apple.consent_revoked', 'apple.account_deleted', 'apple.email_disabled', 'apple.email_enabled',
    'google.sessions_revoked', 'google.tokens_revoked', 'google.token_revoked', 'google.account_disabled',
    'google.account_enabled', 'google.account_purged', 'google.account_credential_change_required',
    'google.verification', 'audit.checkpoint', 'audit.checkpoint_refused',
    'grant.held', 'grant.failed')) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

CREATE OR REPLACE FUNCTION revoker.outbox_revocation_final() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events
        (type, client_id, request_id, external_reference, apple_user_id, outcome, error_code, provider, grant_id)
    VALUES
        (CASE WHEN NEW.purpose = 'hold' THEN CASE WHEN NEW.outcome = 'held' THEN 'grant.held' ELSE 'grant.failed' END
              ELSE 'revocation.' || NEW.state END,
         NEW.client_id, NEW.id, NEW.external_reference, NEW.apple_user_id,
         NEW.outcome, CASE WHEN NEW.state = 'failed' THEN NEW.last_error_code END, NEW.provider, NEW.grant_id);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE VIEW revoker.events AS
    SELECT e.txid, e.position, e.txid::text || '-' || e.position::text AS cursor,
           e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference, e.apple_user_id,
           e.outcome, e.error_code, e.notification_id, e.event_time, e.provider, e.checkpoint, e.grant_id
    FROM revoker.outbox_events e
    WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot());

-- ---------------------------------------------------------------------------------------
-- SQL enqueue: the provider is the app's (revoker.apps), and a grant's requests do not count
-- against the one-live rule. Otherwise as migration 0003.
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
    v_provider text;
BEGIN
    PERFORM revoker.check_grant_fields(enqueue_revocation.client_id, enqueue_revocation.external_reference,
                                       'external_reference', enqueue_revocation.apple_user_id, 'apple_user_id',
                                       enqueue_revocation.credential, enqueue_revocation.redirect_uri);
    IF enqueue_revocation.credential_kind IS NULL
       OR enqueue_revocation.credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code, refresh_token or access_token' USING ERRCODE = '22023';
    END IF;
    IF coalesce(enqueue_revocation.max_attempts, 8) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 100' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(a.provider, 'apple') INTO v_provider FROM revoker.apps a WHERE a.client_id = enqueue_revocation.client_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'client_id must name an app Revoker is configured for (revoker.apps)' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_key FROM revoker.current_intake_key();
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(enqueue_revocation.credential, 'UTF8'));

    FOR attempt IN 1..10 LOOP
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, redirect_uri, max_attempts)
        VALUES
            (v_provider, enqueue_revocation.client_id, enqueue_revocation.external_reference,
             enqueue_revocation.apple_user_id, enqueue_revocation.credential_kind,
             enqueue_revocation.credential_kind, v_digest, enqueue_revocation.redirect_uri,
             coalesce(enqueue_revocation.max_attempts, 8))
        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') AND grant_id IS NULL
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
                 'sql:' || left(session_user::text, 190),
                 'provider=' || v_provider || ' kind=' || enqueue_revocation.credential_kind);
            RETURN v_id;
        END IF;

        SELECT r.id, r.enqueued_kind, r.credential_digest
          INTO v_existing
          FROM revoker.revocation_requests r
         WHERE r.client_id = enqueue_revocation.client_id
           AND r.external_reference = enqueue_revocation.external_reference
           AND r.state IN ('pending', 'running') AND r.grant_id IS NULL;
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

-- The rules of NewRevocation and NewGrant shared by the SQL functions (one place, one wording).
CREATE FUNCTION revoker.check_grant_fields(
    client_id   text,
    reference   text,
    reference_name text,
    user_id     text,
    user_name   text,
    credential  text,
    redirect_uri text
) RETURNS void
    LANGUAGE plpgsql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_visible constant text := ' characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space';
BEGIN
    IF client_id IS NULL OR char_length(client_id) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(client_id) THEN
        RAISE EXCEPTION 'client_id must be 1 to 255%', v_visible USING ERRCODE = '22023';
    END IF;
    IF reference IS NULL OR char_length(reference) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(reference) THEN
        RAISE EXCEPTION '% must be 1 to 255%', reference_name, v_visible USING ERRCODE = '22023';
    END IF;
    IF user_id IS NOT NULL AND (char_length(user_id) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(user_id)) THEN
        RAISE EXCEPTION '% must be 1 to 255%', user_name, v_visible USING ERRCODE = '22023';
    END IF;
    IF credential IS NULL OR octet_length(credential) NOT BETWEEN 1 AND 8192 OR credential !~ '^[!-~]+$' THEN
        RAISE EXCEPTION 'credential must be 8192 bytes at most of printable ASCII without spaces' USING ERRCODE = '22023';
    END IF;
    IF redirect_uri IS NOT NULL
       AND (char_length(redirect_uri) NOT BETWEEN 1 AND 2048
            OR redirect_uri ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
            OR redirect_uri !~* '^https?://[^/?#[:space:]]+') THEN
        RAISE EXCEPTION 'redirect_uri must be an absolute http(s) URL of at most 2048 characters' USING ERRCODE = '22023';
    END IF;
END;
$$;

-- The intake key to encrypt to; an error naming what to do when none is published.
CREATE FUNCTION revoker.current_intake_key(OUT key_id text, OUT public_key bytea)
    LANGUAGE plpgsql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT k.key_id, k.public_key INTO key_id, public_key FROM revoker.intake_keys k WHERE k.is_current;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no intake key is published: configure intake_keys_file and start Revoker (or run revoker migrate)'
            USING ERRCODE = '55000';
    END IF;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- SQL registration, inside the app's own transaction (its sign-in commits with the grant):
-- the code or token is encrypted to the intake key, and a worker exchanges or seals it.
-- Registering the same code or token again returns the same grant.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.register_grant(
    provider          text,
    client_id         text,
    account_reference text,
    credential_kind   text,
    credential        text,
    redirect_uri      text DEFAULT NULL,
    user_id           text DEFAULT NULL
) RETURNS uuid
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_grant    uuid;
    v_request  uuid;
    v_digest   bytea;
    v_existing record;
    v_key      record;
BEGIN
    PERFORM revoker.check_grant_fields(register_grant.client_id, register_grant.account_reference,
                                       'account_reference', register_grant.user_id, 'user_id',
                                       register_grant.credential, register_grant.redirect_uri);
    IF register_grant.credential_kind IS NULL
       OR register_grant.credential_kind NOT IN ('authorization_code', 'refresh_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code or refresh_token' USING ERRCODE = '22023';
    END IF;
    IF register_grant.redirect_uri IS NOT NULL AND register_grant.credential_kind <> 'authorization_code' THEN
        RAISE EXCEPTION 'redirect_uri belongs to an authorization code only' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM revoker.apps a
                   WHERE a.client_id = register_grant.client_id AND coalesce(a.provider, 'apple') = register_grant.provider) THEN
        RAISE EXCEPTION 'provider and client_id must name an app Revoker is configured for (revoker.apps)' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_key FROM revoker.current_intake_key();
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(register_grant.credential, 'UTF8'));

    INSERT INTO revoker.grants AS g
        (provider, client_id, account_reference, user_id, user_source, registered_kind, registered_digest)
    VALUES
        (register_grant.provider, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         CASE WHEN register_grant.user_id IS NOT NULL THEN 'stated' END, register_grant.credential_kind, v_digest)
    ON CONFLICT ON CONSTRAINT grants_registered_once DO NOTHING
    RETURNING g.id INTO v_grant;

    IF v_grant IS NULL THEN
        SELECT g.id, g.account_reference, g.provider INTO v_existing
          FROM revoker.grants g
         WHERE g.client_id = register_grant.client_id AND g.registered_digest = v_digest;
        IF v_existing.account_reference <> register_grant.account_reference OR v_existing.provider <> register_grant.provider THEN
            RAISE EXCEPTION 'this code or token is registered for another account' USING ERRCODE = 'RV409';
        END IF;
        RETURN v_existing.id;
    END IF;

    INSERT INTO revoker.revocation_requests AS r
        (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
         credential_digest, redirect_uri, purpose, grant_id)
    VALUES
        (register_grant.provider, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         register_grant.credential_kind, register_grant.credential_kind, v_digest, register_grant.redirect_uri,
         'hold', v_grant)
    RETURNING r.id INTO v_request;
    UPDATE revoker.grants SET hold_request_id = v_request WHERE id = v_grant;
    INSERT INTO revoker.credential_intake (request_id, key_id, sealed)
    VALUES (v_request, v_key.key_id, revoker.seal_for_intake(register_grant.credential, v_key.public_key));
    INSERT INTO revoker.audit_events
        (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    VALUES
        (v_request, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         'grant_registered', 0, 'sql:' || left(session_user::text, 190),
         'grant=' || v_grant::text || ' provider=' || register_grant.provider || ' kind=' || register_grant.credential_kind
         || CASE WHEN register_grant.user_id IS NOT NULL THEN ' user=stated' ELSE '' END);
    RETURN v_grant;
END;
$$;

REVOKE ALL ON FUNCTION revoker.grants_hold_ended() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.register_grant(text, text, text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.current_intake_key() FROM PUBLIC;

-- What an enqueuer may read of a grant: never its token. A view owned by the schema owner, so
-- the enqueuer needs no right on the table.
CREATE VIEW revoker.grant_states AS
    SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.user_source, g.registered_kind,
           g.state, g.end_reason, g.created_at, g.updated_at, g.held_at, g.ended_at
    FROM revoker.grants g;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (14, '0014_grant_custody', NULL)
ON CONFLICT (version) DO NOTHING;
