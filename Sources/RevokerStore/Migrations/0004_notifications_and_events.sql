-- 0004_notifications_and_events.sql: Apple's server-to-server notifications, the outcomes
-- they and the code-exchange window add, and the outbox of events for app backends.
--
-- Requires PostgreSQL 13 or later (xid8 and pg_current_xact_id()).

-- ---------------------------------------------------------------------------------------
-- Outcomes and audit kinds
--   revoked_by_user  Apple told us the user revoked the grant (consent-revoked) or deleted
--                    their Apple account (account-delete): succeeded without a call.
--   exchange_lost    a rescued request's code exchange was refused after an earlier attempt
--                    had started one: Revoker itself may have used the code.
-- Constraints are added NOT VALID and validated after, which does not block writers.
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_check
    CHECK (outcome IN ('revoked', 'already_invalid', 'revoked_by_user', 'code_rejected', 'exchange_lost',
                       'subject_mismatch', 'exhausted', 'client_misconfigured', 'rejected', 'cancelled')) NOT VALID;
ALTER TABLE revoker.revocation_requests DROP CONSTRAINT revocation_requests_outcome_matches_state;
ALTER TABLE revoker.revocation_requests ADD CONSTRAINT revocation_requests_outcome_matches_state CHECK (
       (state IN ('pending', 'running') AND outcome IS NULL AND finished_at IS NULL)
    OR (state = 'succeeded' AND outcome IN ('revoked', 'already_invalid', 'revoked_by_user') AND finished_at IS NOT NULL)
    OR (state = 'failed' AND outcome IN ('code_rejected', 'exchange_lost', 'subject_mismatch', 'exhausted',
                                         'client_misconfigured', 'rejected') AND finished_at IS NOT NULL)
    OR (state = 'cancelled' AND outcome = 'cancelled' AND finished_at IS NOT NULL)) NOT VALID;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_check;
ALTER TABLE revoker.revocation_requests VALIDATE CONSTRAINT revocation_requests_outcome_matches_state;

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

-- Append-only tables share one refusal.
CREATE FUNCTION revoker.refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'revoker.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'RV403';
END;
$$;

-- ---------------------------------------------------------------------------------------
-- Apple's notifications, as verified and accepted (append-only). The email address Apple
-- may include is not stored: this table cannot forget, and the app backend finds the user by
-- apple_user_id. jti is unique: a replay changes nothing.
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.apple_notifications (
    id               bigserial   PRIMARY KEY,
    jti              text        NOT NULL UNIQUE CHECK (char_length(jti) BETWEEN 1 AND 255),
    client_id        text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    type             text        NOT NULL CHECK (type ~ '^[a-z][a-z0-9-]{0,63}$'),
    type_as_sent     text        NOT NULL CHECK (type_as_sent ~ '^[a-z][a-z0-9-]{0,63}$'),
    apple_user_id    text        NOT NULL CHECK (char_length(apple_user_id) BETWEEN 1 AND 255),
    event_time       timestamptz NOT NULL,
    issued_at        timestamptz NOT NULL,
    expires_at       timestamptz,
    issuer           text        NOT NULL CHECK (char_length(issuer) BETWEEN 1 AND 255),
    key_id           text        NOT NULL CHECK (char_length(key_id) BETWEEN 1 AND 255),
    had_email        boolean     NOT NULL,
    is_private_email boolean,
    received_at      timestamptz NOT NULL DEFAULT now()
);

-- The claim looks a request's user up here (has the user revoked, or deleted the account?).
CREATE INDEX apple_notifications_user ON revoker.apple_notifications (client_id, apple_user_id)
    WHERE type IN ('consent-revoked', 'account-delete');
CREATE INDEX apple_notifications_received ON revoker.apple_notifications (received_at, id);

CREATE TRIGGER apple_notifications_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.apple_notifications
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER apple_notifications_no_truncate
    BEFORE TRUNCATE ON revoker.apple_notifications
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

-- ---------------------------------------------------------------------------------------
-- The outbox: what app backends are told (append-only). Written only by the triggers below,
-- in the transaction of the change it reports, so an event exists exactly when its change
-- committed. Never holds a credential.
--
-- Order and cursors: an event's place is (txid, position). Readers see only events whose
-- transaction is older than every transaction still running (txid < the snapshot's xmin),
-- so an event can never appear behind a cursor a reader already passed; the price is that
-- a long-open transaction anywhere in the cluster delays every event after it.
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.outbox_events (
    position           bigserial   PRIMARY KEY,
    txid               xid8        NOT NULL DEFAULT pg_current_xact_id(),
    id                 uuid        NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    type               text        NOT NULL CHECK (type IN (
        'revocation.succeeded', 'revocation.failed', 'revocation.cancelled',
        'apple.consent_revoked', 'apple.account_deleted', 'apple.email_disabled', 'apple.email_enabled')),
    client_id          text        NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
    occurred_at        timestamptz NOT NULL DEFAULT now(),
    request_id         uuid,
    external_reference text        CHECK (char_length(external_reference) <= 255),
    apple_user_id      text        CHECK (char_length(apple_user_id) <= 255),
    outcome            text        CHECK (char_length(outcome) <= 100),
    error_code         text        CHECK (char_length(error_code) <= 100),
    notification_id    text        CHECK (char_length(notification_id) <= 255),
    event_time         timestamptz
);

CREATE INDEX outbox_events_order ON revoker.outbox_events (txid, position);
CREATE INDEX outbox_events_client_order ON revoker.outbox_events (client_id, txid, position);

CREATE TRIGGER outbox_events_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.outbox_events
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER outbox_events_no_truncate
    BEFORE TRUNCATE ON revoker.outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

-- A request's final outcome. SECURITY DEFINER: the service's role can read the outbox but not
-- write it, so every event is one a change produced.
CREATE FUNCTION revoker.outbox_revocation_final() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events
        (type, client_id, request_id, external_reference, apple_user_id, outcome, error_code)
    VALUES
        ('revocation.' || NEW.state, NEW.client_id, NEW.id, NEW.external_reference, NEW.apple_user_id,
         NEW.outcome, CASE WHEN NEW.state = 'failed' THEN NEW.last_error_code END);
    RETURN NULL;
END;
$$;

CREATE TRIGGER revocation_requests_outbox
    AFTER UPDATE ON revoker.revocation_requests
    FOR EACH ROW
    WHEN (OLD.state IN ('pending', 'running') AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION revoker.outbox_revocation_final();

-- An accepted notification of a documented type.
CREATE FUNCTION revoker.outbox_apple_notification() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time)
    VALUES (CASE NEW.type
                WHEN 'consent-revoked' THEN 'apple.consent_revoked'
                WHEN 'account-delete' THEN 'apple.account_deleted'
                WHEN 'email-disabled' THEN 'apple.email_disabled'
                ELSE 'apple.email_enabled'
            END,
            NEW.client_id, NEW.apple_user_id, NEW.jti, NEW.event_time);
    RETURN NULL;
END;
$$;

CREATE TRIGGER apple_notifications_outbox
    AFTER INSERT ON revoker.apple_notifications
    FOR EACH ROW
    WHEN (NEW.type IN ('consent-revoked', 'account-delete', 'email-disabled', 'email-enabled'))
    EXECUTE FUNCTION revoker.outbox_apple_notification();

-- Wake-up for readers and deliverers: one notification per statement.
CREATE FUNCTION revoker.notify_outbox_events() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('revoker_events', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_events_notify
    AFTER INSERT ON revoker.outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.notify_outbox_events();

-- For app backends in the same database: the events readers may see, in order, with the
-- cursor `GET /v1/events?after=` takes. Read them after a cursor with
--     SELECT * FROM revoker.events WHERE (txid, position) > ($1::xid8, $2::bigint) ORDER BY txid, position LIMIT 100;
-- and LISTEN revoker_events to hear of new ones.
CREATE VIEW revoker.events AS
    SELECT e.txid, e.position, e.txid::text || '-' || e.position::text AS cursor,
           e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference, e.apple_user_id,
           e.outcome, e.error_code, e.notification_id, e.event_time
    FROM revoker.outbox_events e
    WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot());

REVOKE ALL ON FUNCTION revoker.refuse_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_revocation_final() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_apple_notification() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.notify_outbox_events() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (4, '0004_notifications_and_events', NULL)
ON CONFLICT (version) DO NOTHING;
