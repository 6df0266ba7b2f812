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

    WITH doubtful AS (
        SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.registered_digest
        FROM revoker.grants g
        WHERE g.provider = v_provider AND g.client_id = NEW.client_id AND g.user_id = v_user AND g.state = 'held'
          AND g.user_source IS DISTINCT FROM 'verified_id_token'
        ORDER BY g.id
        FOR UPDATE
    ), requested AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id)
        SELECT d.provider, d.client_id, d.account_reference, d.user_id, 'refresh_token', 'refresh_token',
               d.registered_digest, 'revoke', d.id
        FROM doubtful d
        RETURNING r.id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.grant_id
    ), moved AS (
        UPDATE revoker.grants g
        SET state = 'revoking', revoke_request_id = q.id, updated_at = now()
        FROM requested q
        WHERE g.id = q.grant_id
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT q.id, q.client_id, q.external_reference, q.apple_user_id, 'enqueued', 0, 'revoker',
           'provider=' || q.provider || ' kind=refresh_token grant=' || q.grant_id::text || ' ' || NEW.type
           || ' names the user this grant was registered under, never proven its owner: revoked, not erased'
    FROM requested q ORDER BY q.id;
    RETURN NULL;
END;
$$;

REVOKE ALL ON FUNCTION revoker.grants_told_gone() FROM PUBLIC;

-- 0021's file does not record its own version: a database migrated with psql is recorded here,
-- so that `revoker migrate` adopts it instead of applying 0021 again.
INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (21, '0021_trace_context', NULL), (23, '0023_grants_by_proof', NULL)
ON CONFLICT (version) DO NOTHING;
