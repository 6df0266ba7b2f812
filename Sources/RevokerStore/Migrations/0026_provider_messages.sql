-- 0026_provider_messages.sql: one table for the messages every provider pushes.
--
-- Each provider had a table of its own (apple_notifications, google_security_events), and the
-- claim, the grants' trigger and the outbox named them, so a provider that pushes messages
-- needed a migration. Now a message is what every message has (provider, id, app, type, user,
-- whether it ends the user's grants or account, times, key) and the provider's own fields as
-- one jsonb object its plug-in reads; the outbox event it publishes is named by the plug-in
-- too. The two tables' rows move here, and each name stays as a read-only view.

CREATE TABLE revoker.provider_messages (
    id           bigserial   PRIMARY KEY,
    provider     text        NOT NULL CHECK (provider ~ '^[a-z][a-z0-9_]{0,31}$'),
    -- The provider's id of the message (a JWT's jti): a replay changes nothing.
    message_id   text        NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 255),
    client_id    text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    type         text        NOT NULL CHECK (type ~ '^[a-z][a-z0-9-]{0,63}$'),
    -- The user at the provider; NULL when the message names none (a token's hash, a check).
    user_id      text        CHECK (char_length(user_id) BETWEEN 1 AND 255),
    -- The user's grants for the app are gone; ends_account: with the user's account.
    ends_grants  boolean     NOT NULL,
    ends_account boolean     NOT NULL DEFAULT false CHECK (ends_grants OR NOT ends_account),
    -- The app backend's event for it (`<provider>.<what>`), or NULL when it is told nothing.
    event_type   text        CHECK (event_type ~ '^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,63}$'
                                    AND starts_with(event_type, provider || '.')),
    issued_at    timestamptz NOT NULL,
    -- When the user acted, by the provider's clock, when it says.
    event_time   timestamptz,
    issuer       text        NOT NULL CHECK (char_length(issuer) BETWEEN 1 AND 255),
    key_id       text        NOT NULL CHECK (char_length(key_id) BETWEEN 1 AND 255),
    details      jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object'),
    received_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, message_id),
    CHECK (user_id IS NOT NULL OR NOT ends_grants)
);

-- The claim looks a request's user up here (are the user's grants gone?).
CREATE INDEX provider_messages_user ON revoker.provider_messages (provider, client_id, user_id) WHERE ends_grants;
CREATE INDEX provider_messages_received ON revoker.provider_messages (received_at, id);

CREATE TRIGGER provider_messages_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.provider_messages
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER provider_messages_no_truncate
    BEFORE TRUNCATE ON revoker.provider_messages
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

-- The rows so far, in the order they came. Apple's consent-revoked and account-delete and
-- Google's tokens-revoked and account-purged (naming a user) ended grants; the event types are
-- the ones the two outbox triggers gave.
INSERT INTO revoker.provider_messages
    (provider, message_id, client_id, type, user_id, ends_grants, ends_account, event_type,
     issued_at, event_time, issuer, key_id, details, received_at)
SELECT provider, message_id, client_id, type, user_id, ends_grants, ends_account, event_type,
       issued_at, event_time, issuer, key_id, details, received_at
FROM (
    SELECT 'apple' AS provider, n.jti AS message_id, n.client_id, n.type, n.apple_user_id AS user_id,
           n.type IN ('consent-revoked', 'account-delete') AS ends_grants, n.type = 'account-delete' AS ends_account,
           CASE n.type
               WHEN 'consent-revoked' THEN 'apple.consent_revoked'
               WHEN 'account-delete' THEN 'apple.account_deleted'
               WHEN 'email-disabled' THEN 'apple.email_disabled'
               WHEN 'email-enabled' THEN 'apple.email_enabled'
           END AS event_type,
           n.issued_at, n.event_time, n.issuer, n.key_id,
           jsonb_strip_nulls(jsonb_build_object(
               'type_as_sent', n.type_as_sent, 'expires_at', n.expires_at,
               'had_email', n.had_email, 'is_private_email', n.is_private_email)) AS details,
           n.received_at, n.id AS old_id
    FROM revoker.apple_notifications n
    UNION ALL
    SELECT 'google', g.jti, g.client_id, g.type, g.google_user_id,
           g.type IN ('tokens-revoked', 'account-purged') AND g.google_user_id IS NOT NULL,
           g.type = 'account-purged' AND g.google_user_id IS NOT NULL,
           CASE WHEN g.type IN ('sessions-revoked', 'tokens-revoked', 'token-revoked', 'account-disabled', 'account-enabled',
                                'account-purged', 'account-credential-change-required', 'verification')
                THEN 'google.' || replace(g.type, '-', '_') END,
           g.issued_at, g.issued_at, g.issuer, g.key_id,
           jsonb_strip_nulls(jsonb_build_object('audience', g.audience, 'type_uri', g.type_uri, 'reason', g.reason)),
           g.received_at, g.id
    FROM revoker.google_security_events g
) old
ORDER BY received_at, provider, old_id;

DROP TABLE revoker.apple_notifications;
DROP TABLE revoker.google_security_events;
DROP FUNCTION revoker.outbox_apple_notification();
DROP FUNCTION revoker.outbox_google_security_event();

-- The two names as they read before, for queries and reports written against them.
CREATE VIEW revoker.apple_notifications AS
    SELECT m.id, m.message_id AS jti, m.client_id, m.type, m.details ->> 'type_as_sent' AS type_as_sent,
           m.user_id AS apple_user_id, m.event_time, m.issued_at, (m.details ->> 'expires_at')::timestamptz AS expires_at,
           m.issuer, m.key_id, (m.details ->> 'had_email')::boolean AS had_email,
           (m.details ->> 'is_private_email')::boolean AS is_private_email, m.received_at
    FROM revoker.provider_messages m
    WHERE m.provider = 'apple';
CREATE VIEW revoker.google_security_events AS
    SELECT m.id, m.message_id AS jti, m.client_id, m.details ->> 'audience' AS audience, m.type,
           m.details ->> 'type_uri' AS type_uri, m.user_id AS google_user_id, m.details ->> 'reason' AS reason,
           m.issued_at, m.issuer, m.key_id, m.received_at
    FROM revoker.provider_messages m
    WHERE m.provider = 'google';

-- A message the app backend is told of becomes its outbox event.
CREATE FUNCTION revoker.outbox_provider_message() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time, provider)
    VALUES (NEW.event_type, NEW.client_id, NEW.user_id, NEW.message_id, coalesce(NEW.event_time, NEW.issued_at), NEW.provider);
    RETURN NULL;
END;
$$;

CREATE TRIGGER provider_messages_outbox
    AFTER INSERT ON revoker.provider_messages
    FOR EACH ROW
    WHEN (NEW.event_type IS NOT NULL)
    EXECUTE FUNCTION revoker.outbox_provider_message();

-- A provider's event is named under the provider; the others are Revoker's own.
ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (
    type IN ('revocation.succeeded', 'revocation.failed', 'revocation.cancelled', 'audit.checkpoint',
             'audit.checkpoint_refused', 'grant.held', 'grant.failed', 'account.deletion_requested',
             'account.deletion_completed')
    OR (type ~ '^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,63}$' AND starts_with(type, provider || '.'))) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

-- The audit kind of a provider's messages: Apple's and Google's keep theirs; any other
-- provider's is provider_message.
ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event', 'checkpoint_refused', 'grant_registered', 'grant_held',
    'deletion_requested', 'deletion_grant', 'deletion_completed', 'grant_ended', 'provider_message')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

-- ---------------------------------------------------------------------------------------
-- The provider says a user's grants are gone: a grant proven to be that user's dies without a
-- call, its token erased. A grant whose user was only stated may hold someone else's token: it
-- is revoked (a request of purpose 'revoke' on the grant), never erased unheard.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION revoker.grants_told_gone() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    WITH ended AS (
        UPDATE revoker.grants g
        SET state = 'dead', end_reason = NEW.type, sealed_token = NULL, token_key_id = NULL, ended_at = now(), updated_at = now()
        WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id AND g.state = 'held'
          AND g.user_source = 'verified_id_token'
        RETURNING g.id, g.hold_request_id, g.client_id, g.account_reference, g.user_id
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT e.hold_request_id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || e.id::text || ' state=dead outcome=' || NEW.type || ' (the provider says so; token erased)'
    FROM ended e ORDER BY e.id;

    PERFORM revoker.request_grant_revocations(
        ARRAY(SELECT g.id FROM revoker.grants g
              WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id AND g.state = 'held'
                AND g.user_source IS DISTINCT FROM 'verified_id_token'
              ORDER BY g.id FOR UPDATE),
        NULL, 'revoker',
        NEW.type || ' names the user this grant was registered under, never proven its owner: revoked, not erased');
    RETURN NULL;
END;
$$;

CREATE TRIGGER provider_messages_end_grants
    AFTER INSERT ON revoker.provider_messages
    FOR EACH ROW
    WHEN (NEW.ends_grants)
    EXECUTE FUNCTION revoker.grants_told_gone();

REVOKE ALL ON FUNCTION revoker.outbox_provider_message() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (26, '0026_provider_messages', NULL)
ON CONFLICT (version) DO NOTHING;
