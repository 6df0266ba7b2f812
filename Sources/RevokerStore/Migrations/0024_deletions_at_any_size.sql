-- 0024_deletions_at_any_size.sql: a deletion of any size is accepted at once, each app's
-- deletions are its own, and a sign-in never slips past a deletion.
--
-- Size: asking for a deletion marks the account's grants in one statement and makes the first
-- batch of revocation requests; the workers make the rest in bounded batches
-- (revoker.fan_out_deletions), so no transaction grows with the account. A deletion completes
-- only once every grant it covers has had its request.
--
-- Apps: a live deletion of the same apps (or of more apps, every app among them) is the answer
-- to asking again; otherwise a new deletion covers the grants of its apps that no live deletion
-- covers. One app's deletion neither waits for nor names another's.
--
-- Sign-in: a registration and a deletion of one account reference take the same lock, so one
-- sees the other whole. A grant registered while a deletion of its app runs joins it (revoked
-- once it is held); one registered after the deletion completed is a new sign-in, held until a
-- later deletion.

ALTER TABLE revoker.account_deletions ADD COLUMN fanned_out boolean NOT NULL DEFAULT true;
CREATE INDEX account_deletions_fanning_out ON revoker.account_deletions (requested_at, id) WHERE state = 'pending' AND NOT fanned_out;

DROP INDEX revoker.account_deletions_one_live;
CREATE UNIQUE INDEX account_deletions_one_live
    ON revoker.account_deletions (account_reference, (coalesce(client_ids, '{}'::text[]))) WHERE state = 'pending';

-- The lock a deletion takes exclusively, and a registration shared, for one account reference.
CREATE FUNCTION revoker.account_lock_key(p_account_reference text) RETURNS bigint
    LANGUAGE sql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT hashtextextended('revoker.account:' || p_account_reference, 0)
$$;

-- ---------------------------------------------------------------------------------------
-- Up to p_limit revocation requests for the held grants of a live deletion that it has not
-- asked about yet, in one statement; the last batch marks it fanned out (its caller then
-- completes it, once it has added what else it carries). Returns how many requests it made.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.fan_out_deletion(p_deletion uuid, p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM 1 FROM revoker.account_deletions d WHERE d.id = p_deletion AND d.state = 'pending' AND NOT d.fanned_out FOR UPDATE;
    IF NOT FOUND OR p_limit < 1 THEN
        RETURN 0;
    END IF;
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT p_deletion, q.client_id, q.account_reference, q.user_id, 'deletion_grant', 0, p_actor,
           'grant=' || q.grant_id::text || ' provider=' || q.provider || ' request=' || q.request_id::text
    FROM revoker.request_grant_revocations(
        ARRAY(SELECT g.id FROM revoker.grants g
              WHERE g.deletion_id = p_deletion AND g.state = 'held'
                AND NOT EXISTS (SELECT 1 FROM revoker.revocation_requests r
                                WHERE r.id = g.revoke_request_id AND r.deletion_id = p_deletion)
              ORDER BY g.created_at, g.id
              LIMIT p_limit
              FOR UPDATE),
        p_deletion, p_actor, 'deletion=' || p_deletion::text) AS q
    ORDER BY q.grant_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count < p_limit THEN
        UPDATE revoker.account_deletions SET fanned_out = true WHERE id = p_deletion;
    END IF;
    RETURN v_count;
END;
$$;

-- Fans out the live deletions that wait for it, oldest first, up to p_limit requests in all;
-- several workers at once skip each other's deletions. Returns how many requests it made.
CREATE FUNCTION revoker.fan_out_deletions(p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_deletion uuid;
    v_made     integer;
    v_total    integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'the limit must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    FOR v_deletion IN
        SELECT d.id FROM revoker.account_deletions d
        WHERE d.state = 'pending' AND NOT d.fanned_out
        ORDER BY d.requested_at, d.id
        LIMIT 10
        FOR UPDATE SKIP LOCKED
    LOOP
        v_made := revoker.fan_out_deletion(v_deletion, p_limit - v_total, p_actor);
        IF v_made < p_limit - v_total THEN
            -- Its last batch: it may be complete already (every request ended meanwhile).
            PERFORM revoker.complete_deletion(v_deletion);
        END IF;
        v_total := v_total + v_made;
        EXIT WHEN v_total >= p_limit;
    END LOOP;
    RETURN v_total;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- Ends a deletion once it has asked about every grant and none of its grants or requests is
-- in flight (as in 0015, with the fan-out's end awaited).
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.complete_deletion(p_deletion uuid) RETURNS void
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
    IF NOT FOUND OR NOT v_deletion.fanned_out THEN
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
-- Asking for a deletion: under the account's lock, the live deletion that already covers these
-- apps, or a new one over the grants of its apps that no live deletion covers, with its first
-- batch of requests. The caller completes it (revoker.complete_deletion) once it has added what
-- else it carries.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.start_account_deletion(
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
    v_scope text[];
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
    PERFORM pg_advisory_xact_lock(revoker.account_lock_key(p_account_reference));

    SELECT d.id INTO deletion_id FROM revoker.account_deletions d
    WHERE d.account_reference = p_account_reference AND d.state = 'pending'
      AND (d.client_ids IS NULL OR (v_scope IS NOT NULL AND d.client_ids @> v_scope))
    ORDER BY d.client_ids IS NOT DISTINCT FROM v_scope DESC, d.requested_at, d.id
    LIMIT 1;
    IF FOUND THEN
        created := false;
        RETURN;
    END IF;

    INSERT INTO revoker.account_deletions AS d (account_reference, client_ids, requested_by, fanned_out)
    VALUES (p_account_reference, v_scope, p_actor, false)
    RETURNING d.id INTO deletion_id;
    created := true;

    -- Every live grant it covers that no live deletion covers; one in the hands of an earlier
    -- deletion that ended with it still held is taken again.
    UPDATE revoker.grants g SET deletion_id = start_account_deletion.deletion_id, updated_at = now()
    WHERE g.account_reference = p_account_reference AND g.state IN ('pending', 'held')
      AND (v_scope IS NULL OR g.client_id = ANY (v_scope))
      AND NOT EXISTS (SELECT 1 FROM revoker.account_deletions o WHERE o.id = g.deletion_id AND o.state = 'pending');
    INSERT INTO revoker.audit_events (request_id, external_reference, event, attempt, actor, detail)
    VALUES (deletion_id, p_account_reference, 'deletion_requested', 0, p_actor,
            'apps=' || coalesce(left(array_to_string(v_scope, ','), 400), 'all')
            || ' grants=' || (SELECT count(*) FROM revoker.grants g WHERE g.deletion_id = start_account_deletion.deletion_id));
    PERFORM revoker.fan_out_deletion(deletion_id, 200, p_actor);
    PERFORM revoker.publish_deletion(deletion_id, 'account.deletion_requested');
END;
$$;

-- ---------------------------------------------------------------------------------------
-- One event per app the deletion concerns: the apps of its grants and requests, else the apps
-- it was limited to. A deletion of every app that found nothing is told to no app: none of
-- them had a part in it (its answer and trail say so).
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.publish_deletion(p_deletion uuid, p_type text) RETURNS void
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
    v_apps := coalesce(v_apps, v_deletion.client_ids);
    INSERT INTO revoker.outbox_events (type, client_id, external_reference, outcome, deletion)
    SELECT p_type, app, v_deletion.account_reference, v_deletion.outcome, revoker.deletion_summary(p_deletion, app)
    FROM unnest(v_apps) AS app;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- A grant is registered under the account's lock (shared: registrations do not wait for each
-- other), and joins the live deletion of its app when one runs.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.grants_join_live_deletion() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(revoker.account_lock_key(NEW.account_reference));
    IF NEW.deletion_id IS NULL THEN
        SELECT d.id INTO NEW.deletion_id FROM revoker.account_deletions d
        WHERE d.account_reference = NEW.account_reference AND d.state = 'pending'
          AND (d.client_ids IS NULL OR NEW.client_id = ANY (d.client_ids))
        ORDER BY d.requested_at, d.id
        LIMIT 1;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER grants_join_live_deletion BEFORE INSERT ON revoker.grants
    FOR EACH ROW EXECUTE FUNCTION revoker.grants_join_live_deletion();

-- Whether a deletion's trace context may go with its events: it was limited to the caller's
-- apps, or it touched one app only. A deletion of every app that touched several was asked by
-- none of them, and one trace id on several apps' events would tie their parts together.
CREATE FUNCTION revoker.deletion_trace_shared(p_deletion uuid) RETURNS boolean
    LANGUAGE sql
    STABLE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT d.client_ids IS NOT NULL
        OR (SELECT count(DISTINCT c) FROM (
                SELECT g.client_id AS c FROM revoker.grants g WHERE g.deletion_id = d.id
                UNION ALL SELECT r.client_id FROM revoker.revocation_requests r WHERE r.deletion_id = d.id AND r.grant_id IS NULL) apps) <= 1
    FROM revoker.account_deletions d WHERE d.id = p_deletion
$$;

REVOKE ALL ON FUNCTION revoker.fan_out_deletion(uuid, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.fan_out_deletions(integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.complete_deletion(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.start_account_deletion(text, text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.publish_deletion(uuid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.grants_join_live_deletion() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.deletion_trace_shared(uuid) FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (24, '0024_deletions_at_any_size', NULL)
ON CONFLICT (version) DO NOTHING;
