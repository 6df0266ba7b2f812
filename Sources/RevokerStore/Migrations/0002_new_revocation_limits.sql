-- Revoker schema, migration 0002: one set of limits for a new revocation, whichever way it
-- arrives. The Swift API, the HTTP API and `revoker enqueue` check them in NewRevocation; this
-- makes the table and revoker.enqueue_revocation agree with it:
--   client_id, external_reference, apple_user_id  1-255 characters, no control characters
--   credential                                    1-8192 bytes of printable ASCII, no spaces
--   redirect_uri                                  1-2048 characters, an absolute http(s) URL
--   max_attempts                                  1-100 (the table allowed up to 1000)
-- Applied by `revoker migrate`, or with psql after 0001.

-- Existing rows stay valid: a request that was allowed more than 100 attempts keeps 100.
UPDATE revoker.revocation_requests SET max_attempts = 100 WHERE max_attempts > 100;

ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_max_attempts_check;
ALTER TABLE revoker.revocation_requests
    ADD CONSTRAINT revocation_requests_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 100);

-- The same signature, so grants (EXECUTE for revoker_worker and revoker_enqueuer) and the
-- REVOKE from PUBLIC stay as they are.
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
    -- Unicode's control characters (general category Cc), as NewRevocation refuses them.
    v_control  constant text := E'[\\u0001-\\u001f\\u007f-\\u009f]';
BEGIN
    IF enqueue_revocation.client_id IS NULL
       OR char_length(enqueue_revocation.client_id) NOT BETWEEN 1 AND 255
       OR enqueue_revocation.client_id ~ v_control THEN
        RAISE EXCEPTION 'client_id must be 1 to 255 characters without control characters' USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.external_reference IS NULL
       OR char_length(enqueue_revocation.external_reference) NOT BETWEEN 1 AND 255
       OR enqueue_revocation.external_reference ~ v_control THEN
        RAISE EXCEPTION 'external_reference must be 1 to 255 characters without control characters' USING ERRCODE = '22023';
    END IF;
    IF enqueue_revocation.apple_user_id IS NOT NULL
       AND (char_length(enqueue_revocation.apple_user_id) NOT BETWEEN 1 AND 255
            OR enqueue_revocation.apple_user_id ~ v_control) THEN
        RAISE EXCEPTION 'apple_user_id must be 1 to 255 characters without control characters' USING ERRCODE = '22023';
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
            OR enqueue_revocation.redirect_uri ~ v_control
            OR enqueue_revocation.redirect_uri !~* '^https?://[^/?#[:space:]]+') THEN
        RAISE EXCEPTION 'redirect_uri must be an absolute http(s) URL of at most 2048 characters' USING ERRCODE = '22023';
    END IF;
    IF coalesce(enqueue_revocation.max_attempts, 8) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 100' USING ERRCODE = '22023';
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

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (2, '0002_new_revocation_limits', NULL)
ON CONFLICT (version) DO NOTHING;
