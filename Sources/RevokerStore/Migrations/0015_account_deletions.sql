-- 0015_account_deletions.sql: deleting an account by its reference alone.
--
-- A deletion is a record with its own outcome. It covers every grant of the account that is
-- live when it is asked (held, or pending while its code is exchanged), across providers and
-- the apps the caller may touch: each held grant gets one revocation request (purpose
-- 'revoke', the grant's sealed token as its credential) carried by the queue as every request
-- is; a pending grant gets its request when it is taken in. The deletion ends when none of its
-- grants is in flight: 'revoked' when every one ended (revoked, found dead, or never held),
-- 'nothing_held' when it covered none, 'incomplete' when a grant is still held (its revocation
-- failed: asking again retries it). Its audit rows form a chain of their own, keyed by its id.

CREATE TABLE revoker.account_deletions (
    id                uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    account_reference text        NOT NULL CHECK (char_length(account_reference) BETWEEN 1 AND 255),
    -- The apps it covers, sorted; NULL: every app (a key not limited to some).
    client_ids        text[]      CHECK (client_ids IS NULL OR cardinality(client_ids) BETWEEN 1 AND 100),
    state             text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'completed')),
    outcome           text        CHECK (outcome IN ('revoked', 'nothing_held', 'incomplete')),
    requested_by      text        NOT NULL CHECK (char_length(requested_by) BETWEEN 1 AND 200),
    requested_at      timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz,
    CONSTRAINT account_deletions_outcome CHECK ((state = 'completed') = (outcome IS NOT NULL AND completed_at IS NOT NULL))
);

-- One deletion of an account at a time: asking again while one runs finds it.
CREATE UNIQUE INDEX account_deletions_one_live ON revoker.account_deletions (account_reference) WHERE state = 'pending';
CREATE INDEX account_deletions_account ON revoker.account_deletions (account_reference, requested_at, id);

ALTER TABLE revoker.grants ADD COLUMN deletion_id uuid REFERENCES revoker.account_deletions (id);
ALTER TABLE revoker.revocation_requests ADD COLUMN deletion_id uuid REFERENCES revoker.account_deletions (id);
CREATE INDEX grants_deletion ON revoker.grants (deletion_id) WHERE deletion_id IS NOT NULL;
CREATE INDEX revocation_requests_deletion ON revoker.revocation_requests (deletion_id) WHERE deletion_id IS NOT NULL;

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event', 'checkpoint_refused', 'grant_registered', 'grant_held',
    'deletion_requested', 'deletion_grant', 'deletion_completed', 'grant_ended')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

ALTER TABLE revoker.outbox_events ADD COLUMN deletion jsonb;
ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (type IN (
    'revocation.succeeded', 'revocation.failed', 'revocation.cancelled',
    'apple.consent_revoked', 'apple.account_deleted', 'apple.email_disabled', 'apple.email_enabled',
    'google.sessions_revoked', 'google.tokens_revoked', 'google.token_revoked', 'google.account_disabled',
    'google.account_enabled', 'google.account_purged', 'google.account_credential_change_required',
    'google.verification', 'audit.checkpoint', 'audit.checkpoint_refused',
    'grant.held', 'grant.failed', 'account.deletion_requested', 'account.deletion_completed')) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

CREATE OR REPLACE VIEW revoker.events AS
    SELECT e.txid, e.position, e.txid::text || '-' || e.position::text AS cursor,
           e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference, e.apple_user_id,
           e.outcome, e.error_code, e.notification_id, e.event_time, e.provider, e.checkpoint, e.grant_id,
           e.deletion
    FROM revoker.outbox_events e
    WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot());

-- ---------------------------------------------------------------------------------------
-- A held grant's revocation request: its credential is the grant's sealed token (the worker
-- opens it there), its user the grant's.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.request_grant_revocation(p_grant revoker.grants, p_actor text) RETURNS uuid
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_request uuid;
BEGIN
    INSERT INTO revoker.revocation_requests AS r
        (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
         credential_digest, purpose, grant_id, deletion_id)
    VALUES
        (p_grant.provider, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'refresh_token', 'refresh_token',
         p_grant.registered_digest, 'revoke', p_grant.id, p_grant.deletion_id)
    RETURNING r.id INTO v_request;
    UPDATE revoker.grants SET state = 'revoking', revoke_request_id = v_request, updated_at = now()
    WHERE id = p_grant.id;
    INSERT INTO revoker.audit_events
        (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    VALUES
        (v_request, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'enqueued', 0, p_actor,
         'provider=' || p_grant.provider || ' kind=refresh_token grant=' || p_grant.id::text
         || ' deletion=' || p_grant.deletion_id::text),
        (p_grant.deletion_id, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'deletion_grant', 0, p_actor,
         'grant=' || p_grant.id::text || ' provider=' || p_grant.provider || ' request=' || v_request::text);
    RETURN v_request;
END;
$$;

-- What a deletion's events say to one app: the deletion, and that app's grants with their fate.
CREATE FUNCTION revoker.deletion_summary(p_deletion uuid, p_client_id text) RETURNS jsonb
    LANGUAGE sql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'id', d.id, 'account_reference', d.account_reference, 'state', d.state, 'outcome', d.outcome,
        'requested_at', d.requested_at, 'completed_at', d.completed_at,
        'grants', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'grant_id', g.id, 'provider', g.provider, 'client_id', g.client_id, 'user_id', g.user_id,
                       'state', g.state, 'outcome', coalesce(g.end_reason, rr.outcome), 'request_id', g.revoke_request_id)
                   ORDER BY g.created_at, g.id)
            FROM revoker.grants g LEFT JOIN revoker.revocation_requests rr ON rr.id = g.revoke_request_id
            WHERE g.deletion_id = d.id AND g.client_id = p_client_id), '[]'::jsonb),
        'requests', coalesce((
            SELECT jsonb_agg(jsonb_build_object('request_id', r.id, 'provider', r.provider, 'state', r.state, 'outcome', r.outcome)
                   ORDER BY r.created_at, r.id)
            FROM revoker.revocation_requests r
            WHERE r.deletion_id = d.id AND r.grant_id IS NULL AND r.client_id = p_client_id), '[]'::jsonb))
    FROM revoker.account_deletions d WHERE d.id = p_deletion
$$;

-- One event per app the deletion concerns: the apps of its grants and requests, else the apps
-- it covers (every app Revoker serves when not limited), so a deletion of nothing is told too.
CREATE FUNCTION revoker.publish_deletion(p_deletion uuid, p_type text) RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_deletion revoker.account_deletions;
    v_apps     text[];
BEGIN
    SELECT * INTO v_deletion FROM revoker.account_deletions WHERE id = p_deletion;
    SELECT array_agg(DISTINCT c) INTO v_apps FROM (
        SELECT g.client_id AS c FROM revoker.grants g WHERE g.deletion_id = p_deletion
        UNION SELECT r.client_id FROM revoker.revocation_requests r WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL) apps;
    IF v_apps IS NULL THEN
        v_apps := coalesce(v_deletion.client_ids, ARRAY(SELECT a.client_id FROM revoker.apps a ORDER BY a.client_id));
    END IF;
    INSERT INTO revoker.outbox_events (type, client_id, external_reference, outcome, deletion)
    SELECT p_type, app, v_deletion.account_reference, v_deletion.outcome, revoker.deletion_summary(p_deletion, app)
    FROM unnest(v_apps) AS app;
END;
$$;

-- Ends a deletion once none of its grants or requests is in flight. Called wherever one of
-- them ends; the deletion's row lock makes the last two enders see each other.
CREATE FUNCTION revoker.complete_deletion(p_deletion uuid) RETURNS void
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_deletion revoker.account_deletions;
    v_count    integer;
    v_outcome  text;
BEGIN
    SELECT * INTO v_deletion FROM revoker.account_deletions WHERE id = p_deletion AND state = 'pending' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM revoker.grants g WHERE g.deletion_id = p_deletion AND g.state IN ('pending', 'revoking'))
       OR EXISTS (SELECT 1 FROM revoker.revocation_requests r
                  WHERE r.deletion_id = p_deletion AND r.state IN ('pending', 'running')) THEN
        RETURN;
    END IF;
    SELECT (SELECT count(*) FROM revoker.grants g WHERE g.deletion_id = p_deletion)
         + (SELECT count(*) FROM revoker.revocation_requests r WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL)
      INTO v_count;
    v_outcome := CASE
        WHEN v_count = 0 THEN 'nothing_held'
        WHEN EXISTS (SELECT 1 FROM revoker.grants g WHERE g.deletion_id = p_deletion AND g.state = 'held')
          OR EXISTS (SELECT 1 FROM revoker.revocation_requests r
                     WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL AND r.state <> 'succeeded') THEN 'incomplete'
        ELSE 'revoked' END;
    UPDATE revoker.account_deletions SET state = 'completed', outcome = v_outcome, completed_at = now() WHERE id = p_deletion;
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT p_deletion, g.client_id, g.account_reference, g.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || g.id::text || ' state=' || g.state || ' outcome=' || coalesce(g.end_reason, rr.outcome, 'none')
    FROM revoker.grants g LEFT JOIN revoker.revocation_requests rr ON rr.id = g.revoke_request_id
    WHERE g.deletion_id = p_deletion
    ORDER BY g.created_at, g.id;
    INSERT INTO revoker.audit_events (request_id, external_reference, event, attempt, actor, detail)
    VALUES (p_deletion, v_deletion.account_reference, 'deletion_completed', 0, 'revoker',
            'outcome=' || v_outcome || ' covered=' || v_count);
    PERFORM revoker.publish_deletion(p_deletion, 'account.deletion_completed');
END;
$$;

-- ---------------------------------------------------------------------------------------
-- Asking for a deletion: the record, one request per held grant, pending grants marked, the
-- audit rows and the requested events. Returns the live deletion when one runs already (the
-- same apps), RV409 when it covers other apps. The caller completes it
-- (revoker.complete_deletion) once it has added what else it carries.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.start_account_deletion(
    p_account_reference text,
    p_client_ids        text[],
    p_actor             text,
    OUT deletion_id     uuid,
    OUT created         boolean
)
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope    text[];
    v_existing revoker.account_deletions;
    v_grant    revoker.grants;
    v_count    integer := 0;
BEGIN
    IF p_account_reference IS NULL OR char_length(p_account_reference) NOT BETWEEN 1 AND 255
       OR NOT revoker.is_visible_text(p_account_reference) THEN
        RAISE EXCEPTION 'account_reference must be 1 to 255 characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space'
            USING ERRCODE = '22023';
    END IF;
    IF p_client_ids IS NOT NULL THEN
        IF cardinality(p_client_ids) NOT BETWEEN 1 AND 100
           OR EXISTS (SELECT 1 FROM unnest(p_client_ids) c WHERE c IS NULL OR char_length(c) NOT BETWEEN 1 AND 255) THEN
            RAISE EXCEPTION 'client_ids must list 1 to 100 client_ids of 1 to 255 characters' USING ERRCODE = '22023';
        END IF;
        v_scope := ARRAY(SELECT DISTINCT c FROM unnest(p_client_ids) c ORDER BY c);
    END IF;

    INSERT INTO revoker.account_deletions AS d (account_reference, client_ids, requested_by)
    VALUES (p_account_reference, v_scope, p_actor)
    ON CONFLICT (account_reference) WHERE state = 'pending' DO NOTHING
    RETURNING d.id INTO deletion_id;
    IF deletion_id IS NULL THEN
        SELECT * INTO v_existing FROM revoker.account_deletions d
        WHERE d.account_reference = p_account_reference AND d.state = 'pending';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'could not request the deletion: the live one kept changing' USING ERRCODE = '40001';
        END IF;
        IF v_existing.client_ids IS DISTINCT FROM v_scope THEN
            RAISE EXCEPTION 'a deletion of this account covering other apps is under way (%)', v_existing.id USING ERRCODE = 'RV409';
        END IF;
        deletion_id := v_existing.id;
        created := false;
        RETURN;
    END IF;
    created := true;

    -- Every live grant it covers; one in the hands of an earlier deletion that ended with it
    -- still held is taken again.
    UPDATE revoker.grants g SET deletion_id = start_account_deletion.deletion_id, updated_at = now()
    WHERE g.account_reference = p_account_reference AND g.state IN ('pending', 'held')
      AND (v_scope IS NULL OR g.client_id = ANY (v_scope));
    INSERT INTO revoker.audit_events (request_id, external_reference, event, attempt, actor, detail)
    VALUES (deletion_id, p_account_reference, 'deletion_requested', 0, p_actor,
            'apps=' || coalesce(left(array_to_string(v_scope, ','), 400), 'all')
            || ' grants=' || (SELECT count(*) FROM revoker.grants g WHERE g.deletion_id = start_account_deletion.deletion_id));
    FOR v_grant IN
        SELECT * FROM revoker.grants g WHERE g.deletion_id = start_account_deletion.deletion_id AND g.state = 'held'
        ORDER BY g.created_at, g.id
    LOOP
        PERFORM revoker.request_grant_revocation(v_grant, p_actor);
        v_count := v_count + 1;
    END LOOP;
    PERFORM revoker.publish_deletion(deletion_id, 'account.deletion_requested');
END;
$$;

-- The SQL path, inside the app's own transaction: the deletion of an account, by reference.
CREATE FUNCTION revoker.request_account_deletion(account_reference text, client_ids text[] DEFAULT NULL) RETURNS uuid
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_started record;
BEGIN
    SELECT * INTO v_started
    FROM revoker.start_account_deletion(request_account_deletion.account_reference, request_account_deletion.client_ids,
                                        'sql:' || left(session_user::text, 190));
    PERFORM revoker.complete_deletion(v_started.deletion_id);
    RETURN v_started.deletion_id;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- A grant's revocation request ends: the grant ends with it (revoked, or found dead: its
-- token erased), or is held again when the revocation failed, so asking again retries it.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.grants_revoke_ended() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state text := CASE WHEN NEW.outcome = 'revoked' THEN 'revoked'
                         WHEN NEW.outcome IN ('already_invalid', 'revoked_by_user') THEN 'dead'
                         ELSE 'held' END;
BEGIN
    UPDATE revoker.grants g
    SET state = v_state, updated_at = now(),
        end_reason = CASE WHEN v_state <> 'held' THEN NEW.outcome END,
        ended_at = CASE WHEN v_state <> 'held' THEN now() END,
        sealed_token = CASE WHEN v_state = 'held' THEN g.sealed_token END,
        token_key_id = CASE WHEN v_state = 'held' THEN g.token_key_id END
    WHERE g.id = NEW.grant_id AND g.state = 'revoking';
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_revoke_ended
    AFTER UPDATE ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (NEW.purpose = 'revoke' AND NEW.grant_id IS NOT NULL AND OLD.state IN ('pending', 'running')
          AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION revoker.grants_revoke_ended();

-- A deletion's own credential request (no grant) ends: the deletion may be complete.
CREATE FUNCTION revoker.deletion_request_ended() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM revoker.complete_deletion(NEW.deletion_id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_deletion_ended
    AFTER UPDATE ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (NEW.deletion_id IS NOT NULL AND NEW.grant_id IS NULL AND OLD.state IN ('pending', 'running')
          AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION revoker.deletion_request_ended();

-- A grant of a live deletion moves: taken in while the deletion waited (its revocation is
-- requested now), or ended (the deletion may be complete).
CREATE FUNCTION revoker.grants_deletion_moved() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF OLD.state = 'pending' AND NEW.state = 'held'
       AND EXISTS (SELECT 1 FROM revoker.account_deletions d WHERE d.id = NEW.deletion_id AND d.state = 'pending') THEN
        PERFORM revoker.request_grant_revocation(NEW, 'revoker');
        RETURN NULL;
    END IF;
    PERFORM revoker.complete_deletion(NEW.deletion_id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER grants_deletion_moved
    AFTER UPDATE OF state ON revoker.grants
    FOR EACH ROW
    WHEN (NEW.deletion_id IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION revoker.grants_deletion_moved();

-- ---------------------------------------------------------------------------------------
-- The provider says a user's grants are gone (Apple: consent-revoked, account-delete;
-- Google: tokens-revoked, account-purged): that user's held grants of the app die at once,
-- their tokens erased, in the transaction that accepts the message. A grant being revoked is
-- left to its request, which the claim tells of the message (revoked_by_user).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.grants_told_gone() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_provider text := CASE TG_TABLE_NAME WHEN 'apple_notifications' THEN 'apple' ELSE 'google' END;
    v_user     text := CASE TG_TABLE_NAME WHEN 'apple_notifications' THEN to_jsonb(NEW) ->> 'apple_user_id'
                                          ELSE to_jsonb(NEW) ->> 'google_user_id' END;
BEGIN
    WITH ended AS (
        UPDATE revoker.grants g
        SET state = 'dead', end_reason = NEW.type, sealed_token = NULL, token_key_id = NULL, ended_at = now(), updated_at = now()
        WHERE g.provider = v_provider AND g.client_id = NEW.client_id AND g.user_id = v_user AND g.state = 'held'
        RETURNING g.id, g.hold_request_id, g.client_id, g.account_reference, g.user_id
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT e.hold_request_id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || e.id::text || ' state=dead outcome=' || NEW.type || ' (the provider says so; token erased)'
    FROM ended e ORDER BY e.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER apple_notifications_end_grants
    AFTER INSERT ON revoker.apple_notifications
    FOR EACH ROW
    WHEN (NEW.type IN ('consent-revoked', 'account-delete'))
    EXECUTE FUNCTION revoker.grants_told_gone();
CREATE TRIGGER google_security_events_end_grants
    AFTER INSERT ON revoker.google_security_events
    FOR EACH ROW
    WHEN (NEW.type IN ('tokens-revoked', 'account-purged') AND NEW.google_user_id IS NOT NULL)
    EXECUTE FUNCTION revoker.grants_told_gone();

REVOKE ALL ON FUNCTION revoker.grants_told_gone() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.request_grant_revocation(revoker.grants, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.publish_deletion(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.complete_deletion(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.start_account_deletion(text, text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.request_account_deletion(text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.grants_revoke_ended() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.deletion_request_ended() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.grants_deletion_moved() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.deletion_summary(uuid, text) FROM PUBLIC;

-- What an enqueuer or auditor may read of deletions (the table has nothing secret, but grants
-- are read through grant_states: the same for deletions).
CREATE VIEW revoker.deletion_states AS
    SELECT d.id, d.account_reference, d.client_ids, d.state, d.outcome, d.requested_by, d.requested_at, d.completed_at
    FROM revoker.account_deletions d;

CREATE OR REPLACE VIEW revoker.grant_states AS
    SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.user_source, g.registered_kind,
           g.state, g.end_reason, g.created_at, g.updated_at, g.held_at, g.ended_at, g.deletion_id
    FROM revoker.grants g;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (15, '0015_account_deletions', NULL)
ON CONFLICT (version) DO NOTHING;
