-- 0009_providers.sql: a request names its sign-in provider.
--
-- Every request so far was Apple's, and every caller that names no provider still means Apple:
-- the column defaults to 'apple' (a constant default: no table rewrite). apple_user_id keeps
-- its name and holds the user's id at the request's provider (its `sub`). Which providers
-- exist is the configuration's business, so the database checks only the name's shape.
ALTER TABLE revoker.revocation_requests
    ADD COLUMN provider text NOT NULL DEFAULT 'apple' CHECK (provider ~ '^[a-z][a-z0-9_]{0,31}$');

-- A request's final event says whose grant it was.
ALTER TABLE revoker.outbox_events
    ADD COLUMN provider text CHECK (provider ~ '^[a-z][a-z0-9_]{0,31}$');

CREATE OR REPLACE FUNCTION revoker.outbox_revocation_final() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events
        (type, client_id, request_id, external_reference, apple_user_id, outcome, error_code, provider)
    VALUES
        ('revocation.' || NEW.state, NEW.client_id, NEW.id, NEW.external_reference, NEW.apple_user_id,
         NEW.outcome, CASE WHEN NEW.state = 'failed' THEN NEW.last_error_code END, NEW.provider);
    RETURN NULL;
END;
$$;

-- Apple's notifications are Apple's.
CREATE OR REPLACE FUNCTION revoker.outbox_apple_notification() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time, provider)
    VALUES (CASE NEW.type
                WHEN 'consent-revoked' THEN 'apple.consent_revoked'
                WHEN 'account-delete' THEN 'apple.account_deleted'
                WHEN 'email-disabled' THEN 'apple.email_disabled'
                ELSE 'apple.email_enabled'
            END,
            NEW.client_id, NEW.apple_user_id, NEW.jti, NEW.event_time, 'apple');
    RETURN NULL;
END;
$$;

CREATE OR REPLACE VIEW revoker.events AS
    SELECT e.txid, e.position, e.txid::text || '-' || e.position::text AS cursor,
           e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference, e.apple_user_id,
           e.outcome, e.error_code, e.notification_id, e.event_time, e.provider
    FROM revoker.outbox_events e
    WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot());

REVOKE ALL ON FUNCTION revoker.outbox_revocation_final() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_apple_notification() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (9, '0009_providers', NULL)
ON CONFLICT (version) DO NOTHING;
