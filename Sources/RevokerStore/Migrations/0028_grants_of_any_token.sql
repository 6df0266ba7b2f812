-- 0028_grants_of_any_token.sql: a held grant's token may be an access token or an identity
-- token, not only a refresh token (issue 40).
--
-- Some providers end a person's grant with the app's own credentials and the person's id, so
-- the grant a sign-in hands over is an access token that expires (ending the grant needs only
-- whose it was), or an identity token that is itself the grant. `grants.token_kind` says what
-- the sealed token is; the requests that revoke a held grant carry that kind. Only refresh
-- tokens are validated periodically: an access token's expiry does not end its grant, and an
-- identity token has nothing to validate.

ALTER TABLE revoker.grants ADD COLUMN token_kind text NOT NULL DEFAULT 'refresh_token'
    CONSTRAINT grants_token_kind_check CHECK (token_kind IN ('refresh_token', 'access_token', 'identity_token'));

ALTER TABLE revoker.grants DROP CONSTRAINT grants_registered_kind_check;
ALTER TABLE revoker.grants ADD CONSTRAINT grants_registered_kind_check
    CHECK (registered_kind IN ('authorization_code', 'refresh_token', 'access_token', 'identity_token'));

ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_credential_kind_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_credential_kind_check
    CHECK (credential_kind IN ('authorization_code', 'refresh_token', 'access_token', 'identity_token'));
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_enqueued_kind_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_enqueued_kind_check
    CHECK (enqueued_kind IN ('authorization_code', 'refresh_token', 'access_token', 'identity_token'));

CREATE OR REPLACE FUNCTION revoker.register_grant(provider text, client_id text, account_reference text, credential_kind text, credential text, redirect_uri text DEFAULT NULL::text, user_id text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
       OR register_grant.credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code, refresh_token or access_token' USING ERRCODE = '22023';
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

CREATE OR REPLACE FUNCTION revoker.request_grant_revocation(p_grant revoker.grants, p_actor text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_request uuid;
BEGIN
    INSERT INTO revoker.revocation_requests AS r
        (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
         credential_digest, purpose, grant_id, deletion_id)
    VALUES
        (p_grant.provider, p_grant.client_id, p_grant.account_reference, p_grant.user_id, p_grant.token_kind, p_grant.token_kind,
         p_grant.registered_digest, 'revoke', p_grant.id, p_grant.deletion_id)
    RETURNING r.id INTO v_request;
    UPDATE revoker.grants SET state = 'revoking', revoke_request_id = v_request, updated_at = now()
    WHERE id = p_grant.id;
    INSERT INTO revoker.audit_events
        (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    VALUES
        (v_request, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'enqueued', 0, p_actor,
         'provider=' || p_grant.provider || ' kind=' || p_grant.token_kind || ' grant=' || p_grant.id::text
         || ' deletion=' || p_grant.deletion_id::text),
        (p_grant.deletion_id, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'deletion_grant', 0, p_actor,
         'grant=' || p_grant.id::text || ' provider=' || p_grant.provider || ' request=' || v_request::text);
    RETURN v_request;
END;
$$;

CREATE OR REPLACE FUNCTION revoker.request_grant_revocations(p_grants uuid[], p_deletion uuid, p_actor text, p_why text) RETURNS TABLE(request_id uuid, grant_id uuid, provider text, client_id text, account_reference text, user_id text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH requested AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id, deletion_id)
        SELECT g.provider, g.client_id, g.account_reference, g.user_id, g.token_kind, g.token_kind,
               g.registered_digest, 'revoke', g.id, p_deletion
        FROM revoker.grants g
        WHERE g.id = ANY (p_grants) AND g.state = 'held'
        ORDER BY g.created_at, g.id
        RETURNING r.id, r.grant_id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.credential_kind
    ), moved AS (
        UPDATE revoker.grants g
        SET state = 'revoking', revoke_request_id = q.id, updated_at = now()
        FROM requested q
        WHERE g.id = q.grant_id
    ), audit AS (
        INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT q.id, q.client_id, q.external_reference, q.apple_user_id, 'enqueued', 0, p_actor,
               'provider=' || q.provider || ' kind=' || q.credential_kind || ' grant=' || q.grant_id::text || ' ' || p_why
        FROM requested q ORDER BY q.grant_id
    )
    SELECT q.id, q.grant_id, q.provider, q.client_id, q.external_reference, q.apple_user_id FROM requested q
$$;

CREATE OR REPLACE FUNCTION revoker.schedule_grant_validations(p_every interval, p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
        WHERE g.state = 'held' AND g.token_kind = 'refresh_token' AND coalesce(g.validated_at, g.held_at) <= now() - p_every
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

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (28, '0028_grants_of_any_token', NULL)
ON CONFLICT (version) DO NOTHING;
