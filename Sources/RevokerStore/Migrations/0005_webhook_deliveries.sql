-- 0005_webhook_deliveries.sql: where each configured webhook endpoint stands in the event feed.
--
-- One row per endpoint (its configured name). A worker delivers to an endpoint only while it
-- holds the row's lease (fencing token as for requests), so no two workers send the same
-- endpoint events at the same time, and events go out in feed order. The cursor moves only
-- after the endpoint answered 2xx: delivery is at least once, and a repeat (after a worker
-- died mid-call) carries the same webhook-id.

CREATE TABLE revoker.webhook_deliveries (
    endpoint            text        PRIMARY KEY CHECK (endpoint ~ '^[A-Za-z0-9._-]{1,64}$'),
    -- The last event delivered (both NULL: none yet, start from the beginning).
    cursor_txid         xid8,
    cursor_position     bigint,
    delivered           bigint      NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    lease_owner         text        CHECK (char_length(lease_owner) BETWEEN 1 AND 200),
    lease_expires_at    timestamptz,
    fencing_token       bigint      NOT NULL DEFAULT 0,
    -- Failures of the event at the cursor since the last success.
    attempts            integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    failing_since       timestamptz,
    parked_since        timestamptz,
    last_attempt_at     timestamptz,
    last_status         integer     CHECK (last_status BETWEEN 100 AND 599),
    last_error          text        CHECK (char_length(last_error) <= 300),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT webhook_deliveries_cursor_whole CHECK ((cursor_txid IS NULL) = (cursor_position IS NULL)),
    CONSTRAINT webhook_deliveries_lease_whole CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT webhook_deliveries_parked_while_failing CHECK (parked_since IS NULL OR failing_since IS NOT NULL)
);

-- ---------------------------------------------------------------------------------------
-- Retention of the outbox. The outbox refuses UPDATE and DELETE, except the DELETE that
-- revoker.prune_events makes: events older than the cutoff that every endpoint still
-- configured has already received. Apple's notifications and the audit trail are kept.
-- ---------------------------------------------------------------------------------------
-- The one refusal of the append-only tables now lets that DELETE through on the outbox alone.
CREATE OR REPLACE FUNCTION revoker.refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'outbox_events'
       AND current_setting('revoker.pruning_events', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'revoker.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'RV403';
END;
$$;

-- Deletes the events that occurred before `occurred_before` and that each of `endpoints`
-- (the webhook endpoints configured now) has been sent; returns how many. An endpoint that
-- has received nothing yet keeps every event.
CREATE FUNCTION revoker.prune_events(occurred_before timestamptz, endpoints text[]) RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    horizon_txid xid8;
    horizon_position bigint;
    pruned bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM revoker.webhook_deliveries d
               WHERE d.endpoint = ANY(endpoints) AND d.cursor_txid IS NULL) THEN
        RETURN 0;
    END IF;
    SELECT d.cursor_txid, d.cursor_position INTO horizon_txid, horizon_position
    FROM revoker.webhook_deliveries d
    WHERE d.endpoint = ANY(endpoints)
    ORDER BY d.cursor_txid, d.cursor_position
    LIMIT 1;
    PERFORM set_config('revoker.pruning_events', 'on', true);
    DELETE FROM revoker.outbox_events e
    WHERE e.occurred_at < occurred_before
      AND (horizon_txid IS NULL OR (e.txid, e.position) <= (horizon_txid, horizon_position));
    GET DIAGNOSTICS pruned = ROW_COUNT;
    PERFORM set_config('revoker.pruning_events', 'off', true);
    RETURN pruned;
END;
$$;

REVOKE ALL ON FUNCTION revoker.prune_events(timestamptz, text[]) FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (5, '0005_webhook_deliveries', NULL)
ON CONFLICT (version) DO NOTHING;
