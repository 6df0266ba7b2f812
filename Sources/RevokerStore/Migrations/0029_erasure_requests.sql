-- 0029_erasure_requests.sql: a person's request, through their provider, that the app delete
-- their data (issue 40).
--
-- Some providers forward such a request and require the app to answer with a status page the
-- person can read. A message that carries one (provider_messages.erasure_code) opens an erasure
-- request: a public code, unguessable, that reaches its status page; the app's backend is told
-- through the message's event (data.erasure_code) and records whether it deleted the data or
-- refused, with a justification the person can read.

ALTER TABLE revoker.provider_messages ADD COLUMN erasure_code text
    CONSTRAINT provider_messages_erasure_code_check CHECK (erasure_code ~ '^[A-Z2-7]{20}$')
    CONSTRAINT provider_messages_erasure_code_key UNIQUE;
ALTER TABLE revoker.provider_messages ADD CONSTRAINT provider_messages_erasure_user
    CHECK (erasure_code IS NULL OR user_id IS NOT NULL);

CREATE TABLE revoker.erasure_requests (
    code           text        PRIMARY KEY REFERENCES revoker.provider_messages (erasure_code),
    provider       text        NOT NULL,
    client_id      text        NOT NULL,
    user_id        text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    -- The sign-in grants held for the person that the request's message ended.
    grants_ended   integer     NOT NULL DEFAULT 0 CHECK (grants_ended >= 0),
    state          text        NOT NULL DEFAULT 'received' CHECK (state IN ('received', 'deleted', 'refused')),
    justification  text        CHECK (char_length(justification) BETWEEN 1 AND 2000),
    decided_at     timestamptz,
    decided_by     text        CHECK (char_length(decided_by) BETWEEN 1 AND 200),
    CONSTRAINT erasure_requests_decided CHECK ((state = 'received') = (decided_at IS NULL AND decided_by IS NULL)),
    CONSTRAINT erasure_requests_justified CHECK ((state = 'refused') = (justification IS NOT NULL))
);
CREATE INDEX erasure_requests_user ON revoker.erasure_requests (provider, client_id, user_id);

-- Opened with its message, after the message ended the person's grants (triggers fire by name:
-- provider_messages_end_grants, then provider_messages_erasure).
CREATE FUNCTION revoker.erasure_opened() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.erasure_requests (code, provider, client_id, user_id, received_at, grants_ended)
    SELECT NEW.erasure_code, NEW.provider, NEW.client_id, NEW.user_id, NEW.received_at,
           (SELECT count(*)::int FROM revoker.grants g
             WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id
               AND ((g.state = 'dead' AND g.end_reason = NEW.type AND g.ended_at = now()) OR g.state = 'revoking'));
    RETURN NULL;
END;
$$;

CREATE TRIGGER provider_messages_erasure AFTER INSERT ON revoker.provider_messages
    FOR EACH ROW WHEN (NEW.erasure_code IS NOT NULL) EXECUTE FUNCTION revoker.erasure_opened();

-- The backend is told the code with the message's event.
ALTER TABLE revoker.outbox_events ADD COLUMN erasure_code text;

CREATE OR REPLACE FUNCTION revoker.outbox_provider_message() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time, provider, erasure_code)
    VALUES (NEW.event_type, NEW.client_id, NEW.user_id, NEW.message_id, coalesce(NEW.event_time, NEW.issued_at), NEW.provider,
            NEW.erasure_code);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE VIEW revoker.events AS
 SELECT e.txid,
    e."position",
    (((e.txid)::text || '-'::text) || (e."position")::text) AS cursor,
    e.id,
    e.type,
    e.client_id,
    e.occurred_at,
    e.request_id,
    e.external_reference,
    e.apple_user_id,
    e.outcome,
    e.error_code,
    e.notification_id,
    e.event_time,
    e.provider,
    e.checkpoint,
    e.grant_id,
    e.deletion,
    e.erasure_code
   FROM revoker.outbox_events e
  WHERE (e.txid < pg_snapshot_xmin(pg_current_snapshot()));

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (29, '0029_erasure_requests', NULL)
ON CONFLICT (version) DO NOTHING;
