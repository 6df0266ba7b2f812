-- 0023_grants_by_proof.sql: a grant's user is proven by the provider's answer, and a message
-- about a user never erases a grant whose user was only stated.
--
-- An identity token a backend passes on proves who signed in, not whose refresh token it
-- registers: a refresh token is now held only once the provider's token endpoint proved it live
-- (the worker validates it, as it exchanges a code), bound to the user the identity token of
-- that answer names (user_source 'verified_id_token'). A user named at registration is 'stated'
-- until then, and stays so when the provider's answer names nobody.
--
-- Refresh tokens registered before this migration were held without a call, bound to whatever
-- identity token the backend sent: their users are stated, not proven.
UPDATE revoker.grants
SET user_source = 'stated'
WHERE registered_kind = 'refresh_token' AND user_source = 'verified_id_token';

-- ---------------------------------------------------------------------------------------
-- A revocation request for each of the held grants `p_grants` (purpose 'revoke', no sealed
-- credential of its own: the worker opens the grant's), the grant 'revoking', and its
-- 'enqueued' row saying `p_why`; under deletion `p_deletion` when one asks. Returns the requests.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.request_grant_revocations(p_grants uuid[], p_deletion uuid, p_actor text, p_why text)
    RETURNS TABLE (request_id uuid, grant_id uuid, provider text, client_id text, account_reference text, user_id text)
    LANGUAGE sql
    VOLATILE
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH requested AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id, deletion_id)
        SELECT g.provider, g.client_id, g.account_reference, g.user_id, 'refresh_token', 'refresh_token',
               g.registered_digest, 'revoke', g.id, p_deletion
        FROM revoker.grants g
        WHERE g.id = ANY (p_grants) AND g.state = 'held'
        ORDER BY g.created_at, g.id
        RETURNING r.id, r.grant_id, r.provider, r.client_id, r.external_reference, r.apple_user_id
    ), moved AS (
        UPDATE revoker.grants g
        SET state = 'revoking', revoke_request_id = q.id, updated_at = now()
        FROM requested q
        WHERE g.id = q.grant_id
    ), audit AS (
        INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT q.id, q.client_id, q.external_reference, q.apple_user_id, 'enqueued', 0, p_actor,
               'provider=' || q.provider || ' kind=refresh_token grant=' || q.grant_id::text || ' ' || p_why
        FROM requested q ORDER BY q.grant_id
    )
    SELECT q.id, q.grant_id, q.provider, q.client_id, q.external_reference, q.apple_user_id FROM requested q
$$;

-- ---------------------------------------------------------------------------------------
-- The provider says a user's grants are gone (Apple consent-revoked or account-delete, Google
-- tokens-revoked or account-purged): a grant proven to be that user's dies without a call, its
-- token erased. A grant whose user was only stated may hold someone else's token: it is revoked
-- (a request of purpose 'revoke' on the grant), never erased unheard.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.grants_told_gone() RETURNS trigger
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
          AND g.user_source = 'verified_id_token'
        RETURNING g.id, g.hold_request_id, g.client_id, g.account_reference, g.user_id
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT e.hold_request_id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || e.id::text || ' state=dead outcome=' || NEW.type || ' (the provider says so; token erased)'
    FROM ended e ORDER BY e.id;

    PERFORM revoker.request_grant_revocations(
        ARRAY(SELECT g.id FROM revoker.grants g
              WHERE g.provider = v_provider AND g.client_id = NEW.client_id AND g.user_id = v_user AND g.state = 'held'
                AND g.user_source IS DISTINCT FROM 'verified_id_token'
              ORDER BY g.id FOR UPDATE),
        NULL, 'revoker',
        NEW.type || ' names the user this grant was registered under, never proven its owner: revoked, not erased');
    RETURN NULL;
END;
$$;

REVOKE ALL ON FUNCTION revoker.grants_told_gone() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.request_grant_revocations(uuid[], uuid, text, text) FROM PUBLIC;

-- 0021's file does not record its own version: a database migrated with psql is recorded here,
-- so that `revoker migrate` adopts it instead of applying 0021 again.
INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (21, '0021_trace_context', NULL), (23, '0023_grants_by_proof', NULL)
ON CONFLICT (version) DO NOTHING;
