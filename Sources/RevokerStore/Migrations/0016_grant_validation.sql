-- 0016_grant_validation.sql: held grants are validated now and then (custody.validate_every_days).
--
-- A user may remove the app's access while notifications are not configured: the grant is dead
-- at the provider, yet Revoker holds its token. A periodic validation (purpose 'validate': the
-- refresh token proven at the provider's token endpoint, nothing revoked) finds it; the grant is
-- then marked dead and its token erased. Apple asks that a refresh token be validated at most
-- once a day, so the interval is at least a day. A validation is a request like any other: the
-- queue's leases, retries, app pauses, rate limits and audit trail carry it; it tells the app
-- backend nothing unless the grant is found dead (then its trail says so).

-- When a validation last ended on the grant (whatever it found); NULL: never (held_at counts).
ALTER TABLE revoker.grants ADD COLUMN validated_at timestamptz;
CREATE INDEX grants_validation_due ON revoker.grants ((coalesce(validated_at, held_at)), id) WHERE state = 'held';

ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_purpose_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_purpose_check
    CHECK (purpose IN ('revoke', 'hold', 'validate')) NOT VALID;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_purpose_check;

-- live: a validation found the grant's refresh token live (state succeeded, purpose validate only).
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_check
    CHECK (outcome IN ('revoked', 'already_invalid', 'revoked_by_user', 'held', 'live', 'code_rejected', 'exchange_lost',
                       'subject_mismatch', 'exhausted', 'client_misconfigured', 'rejected', 'cancelled')) NOT VALID;
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_matches_state;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_matches_state CHECK (
       (state IN ('pending', 'running') AND outcome IS NULL AND finished_at IS NULL)
    OR (state = 'succeeded' AND outcome IN ('revoked', 'already_invalid', 'revoked_by_user', 'held', 'live') AND finished_at IS NOT NULL)
    OR (state = 'failed' AND outcome IN ('code_rejected', 'exchange_lost', 'subject_mismatch', 'exhausted',
                                         'client_misconfigured', 'rejected') AND finished_at IS NOT NULL)
    OR (state = 'cancelled' AND outcome = 'cancelled' AND finished_at IS NOT NULL)) NOT VALID;
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_purpose_outcome;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_purpose_outcome
    CHECK ((outcome = 'held') <= (purpose = 'hold') AND (outcome = 'live') <= (purpose = 'validate')
           AND (purpose IN ('hold', 'validate')) <= (grant_id IS NOT NULL)) NOT VALID;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_matches_state;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_purpose_outcome;

-- A validation may be in flight when a deletion asks for the grant's revocation: one live
-- validation per grant, and one live request of any other purpose.
DROP INDEX revoker.revocation_requests_one_live_per_grant;
CREATE UNIQUE INDEX revocation_requests_one_live_per_grant
    ON revoker.revocation_requests (grant_id)
    WHERE state IN ('pending', 'running') AND grant_id IS NOT NULL AND purpose <> 'validate';
CREATE UNIQUE INDEX revocation_requests_one_validation
    ON revoker.revocation_requests (grant_id)
    WHERE state IN ('pending', 'running') AND purpose = 'validate';

-- ---------------------------------------------------------------------------------------
-- Scheduling: validation requests for up to p_limit held grants that no validation has ended
-- on for p_every (oldest first), apps paused on a configuration fault left alone. Returns how
-- many were scheduled. Workers call it; several at once skip each other's grants.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.schedule_grant_validations(p_every interval, p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_every IS NULL OR p_every < interval '1 day' THEN
        RAISE EXCEPTION 'a held grant is validated at most once a day, as Apple asks: the interval must be at least 1 day'
            USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'the limit must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    WITH due AS (
        SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.registered_digest
        FROM revoker.grants g
        WHERE g.state = 'held' AND coalesce(g.validated_at, g.held_at) <= now() - p_every
          AND g.client_id <> ALL (ARRAY(SELECT p.client_id FROM revoker.app_pauses p))
          AND NOT EXISTS (SELECT 1 FROM revoker.revocation_requests r
                          WHERE r.grant_id = g.id AND r.purpose = 'validate' AND r.state IN ('pending', 'running'))
        ORDER BY coalesce(g.validated_at, g.held_at), g.id
        LIMIT p_limit
        FOR UPDATE OF g SKIP LOCKED
    ), scheduled AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id)
        SELECT d.provider, d.client_id, d.account_reference, d.user_id, 'refresh_token', 'refresh_token',
               d.registered_digest, 'validate', d.id
        FROM due d
        ON CONFLICT DO NOTHING
        RETURNING r.id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.grant_id
    ), audit AS (
        INSERT INTO revoker.audit_events
            (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT s.id, s.client_id, s.external_reference, s.apple_user_id, 'enqueued', 0, p_actor,
               'provider=' || s.provider || ' kind=refresh_token grant=' || s.grant_id::text || ' purpose=validate'
        FROM scheduled s
        ORDER BY s.id
    )
    SELECT count(*) INTO v_count FROM scheduled;
    RETURN v_count;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- A validation ends: found dead (the provider refused the token), the grant dies and its token
-- is erased; otherwise the grant stays held and the time is noted. A grant no longer held is
-- left to whatever moved it.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.grants_validation_ended() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.outcome IN ('already_invalid', 'revoked_by_user') THEN
        WITH ended AS (
            UPDATE revoker.grants g
            SET state = 'dead', end_reason = NEW.outcome, sealed_token = NULL, token_key_id = NULL,
                ended_at = now(), updated_at = now(), validated_at = now()
            WHERE g.id = NEW.grant_id AND g.state = 'held'
            RETURNING g.id, g.client_id, g.account_reference, g.user_id
        )
        INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT NEW.id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
               'grant=' || e.id::text || ' state=dead outcome=' || NEW.outcome || ' (found invalid when validated; token erased)'
        FROM ended e;
    ELSE
        UPDATE revoker.grants g SET validated_at = now(), updated_at = now()
        WHERE g.id = NEW.grant_id AND g.state = 'held';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_validation_ended
    AFTER UPDATE ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (NEW.purpose = 'validate' AND OLD.state IN ('pending', 'running')
          AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION revoker.grants_validation_ended();

-- A grant that stops being held (a deletion revokes it, the provider says it is gone) needs no
-- validation: one still waiting is cancelled, with its reason in its trail.
CREATE FUNCTION revoker.grants_validation_moot() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    WITH cancelled AS (
        UPDATE revoker.revocation_requests r
        SET state = 'cancelled', outcome = 'cancelled', finished_at = now(), updated_at = now()
        WHERE r.grant_id = NEW.id AND r.purpose = 'validate' AND r.state = 'pending'
        RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT c.id, c.client_id, c.external_reference, c.apple_user_id, 'cancelled', c.attempts, 'revoker',
           'outcome=cancelled the grant is ' || NEW.state || ' now: nothing to validate'
    FROM cancelled c;
    RETURN NULL;
END;
$$;

CREATE TRIGGER grants_validation_moot
    AFTER UPDATE OF state ON revoker.grants
    FOR EACH ROW
    WHEN (OLD.state = 'held' AND NEW.state <> 'held')
    EXECUTE FUNCTION revoker.grants_validation_moot();

-- A validation tells the app backend nothing by itself (the grant's end, when found dead, is in
-- the trail); every other request ends in an event as before.
CREATE OR REPLACE FUNCTION revoker.outbox_revocation_final() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.purpose = 'validate' THEN
        RETURN NULL;
    END IF;
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

-- A refresh token registered through the service is held as its hold request is written,
-- already final: the backend hears grant.held for it as for an exchanged code.
CREATE TRIGGER revocation_requests_outbox_final_at_once
    AFTER INSERT ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (NEW.purpose = 'hold' AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION revoker.outbox_revocation_final();

REVOKE ALL ON FUNCTION revoker.schedule_grant_validations(interval, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.grants_validation_ended() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.grants_validation_moot() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_revocation_final() FROM PUBLIC;

CREATE OR REPLACE VIEW revoker.grant_states AS
    SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.user_source, g.registered_kind,
           g.state, g.end_reason, g.created_at, g.updated_at, g.held_at, g.ended_at, g.deletion_id, g.validated_at
    FROM revoker.grants g;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (16, '0016_grant_validation', NULL)
ON CONFLICT (version) DO NOTHING;
