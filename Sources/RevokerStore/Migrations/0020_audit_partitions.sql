-- 0020_audit_partitions.sql: the trail partitioned by month (issue 27).
--
-- A trail kept for years must be archived a month at a time (revoker audit archive) without
-- rewriting what stays: a month is a partition, detached and dropped whole. Every row keeps its
-- id, time, chain and hash; nothing about a row's meaning changes, so checkpoints signed before
-- still prove the same rows.
--
-- The rows are copied into the new table with its triggers not yet in place (they would stamp
-- them again), then the indexes are built once. On a trail of millions this takes seconds per
-- million rows (README, docs/store.md), under a lock that stops writers meanwhile.
--
-- Partitions: revoker.audit_events_YYYY_MM, a month of UTC each, from the oldest row's month
-- through three months ahead; revoker.audit_ensure_partitions() (the checkpoint service calls it)
-- keeps three months ahead. Only the owner may touch a partition directly: every role reads and
-- writes through revoker.audit_events, whose grants are carried over, and a partition has the
-- parent's row triggers.

LOCK TABLE revoker.audit_events IN ACCESS EXCLUSIVE MODE;
ALTER TABLE revoker.audit_events RENAME TO audit_events_unpartitioned;

CREATE TABLE revoker.audit_events (LIKE revoker.audit_events_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (occurred_at);
ALTER SEQUENCE revoker.audit_events_id_seq OWNED BY revoker.audit_events.id;

-- Adds a partition for each month from first's through last's that has none. Partitions are
-- named and bounded in UTC whatever the session's zone.
CREATE FUNCTION revoker.audit_add_partitions(first timestamptz, last timestamptz) RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
AS $$
DECLARE
    month timestamptz := date_trunc('month', first);
    name text;
    added integer := 0;
BEGIN
    WHILE month <= last LOOP
        name := 'audit_events_' || to_char(month, 'YYYY_MM');
        IF to_regclass('revoker.' || name) IS NULL THEN
            EXECUTE format(
                'CREATE TABLE revoker.%I PARTITION OF revoker.audit_events FOR VALUES FROM (%L) TO (%L)',
                name, month, month + interval '1 month');
            -- A statement trigger on the parent does not see a partition truncated by name.
            EXECUTE format(
                'CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON revoker.%I '
                'FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change()', name);
            added := added + 1;
        END IF;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END;
$$;
REVOKE ALL ON FUNCTION revoker.audit_add_partitions(timestamptz, timestamptz) FROM PUBLIC;

-- What the service calls: this month through three ahead. Creating a partition locks the
-- trail's writers out for a moment; waiting for a long writer is not worth stalling the drain
-- for, so it gives up after a second and the next checkpoint tries again.
CREATE FUNCTION revoker.audit_ensure_partitions() RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET lock_timeout = '1s'
AS $$
BEGIN
    RETURN revoker.audit_add_partitions(now(), now() + interval '3 months');
EXCEPTION WHEN lock_not_available THEN
    RETURN 0;
END;
$$;
REVOKE ALL ON FUNCTION revoker.audit_ensure_partitions() FROM PUBLIC;

SELECT revoker.audit_add_partitions(coalesce(min(occurred_at), now()), now() + interval '3 months')
FROM revoker.audit_events_unpartitioned;

INSERT INTO revoker.audit_events SELECT * FROM revoker.audit_events_unpartitioned ORDER BY id;

-- Who may read and write the trail keeps that right; partitions get none of their own.
DO $$
DECLARE
    granted record;
BEGIN
    FOR granted IN
        SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = 'revoker.audit_events_unpartitioned'::regclass
    LOOP
        EXECUTE format('GRANT %s ON revoker.audit_events TO %s', granted.privilege_type, granted.grantee);
    END LOOP;
END;
$$;

-- The row hash takes the trail's row type: the same function over the new table's type.
CREATE FUNCTION revoker.audit_row_hash(prev bytea, e revoker.audit_events) RETURNS bytea
    LANGUAGE sql
    STABLE PARALLEL SAFE
AS $$
    SELECT sha256('revoker.audit.v1'::bytea || prev
        || revoker.audit_field(e.chain_key) || revoker.audit_field(e.chain_seq::text)
        || revoker.audit_field(e.id::text) || revoker.audit_field(revoker.audit_micros(e.occurred_at)::text)
        || revoker.audit_field(e.txid::text) || revoker.audit_field(e.request_id::text)
        || revoker.audit_field(e.client_id) || revoker.audit_field(e.external_reference)
        || revoker.audit_field(e.apple_user_id) || revoker.audit_field(e.event)
        || revoker.audit_field(e.attempt::text) || revoker.audit_field(e.actor)
        || revoker.audit_field(e.apple_endpoint) || revoker.audit_field(e.http_status::text)
        || revoker.audit_field(e.apple_error) || revoker.audit_field(e.apple_error_description)
        || revoker.audit_field(e.latency_ms::text) || revoker.audit_field(e.detail)
        || revoker.audit_field(e.recorded_by))
$$;

DROP FUNCTION revoker.audit_row_hash(bytea, revoker.audit_events_unpartitioned);
DROP TABLE revoker.audit_events_unpartitioned;

-- A key of a partitioned table must hold its partition key. Ids stay unique by their sequence,
-- and (chain_key, chain_seq) by the stamp's lock: audit verify names a duplicate either way.
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id, occurred_at);
CREATE INDEX audit_events_chain ON revoker.audit_events (chain_key, chain_seq);
CREATE INDEX audit_events_apple_user ON revoker.audit_events (apple_user_id, occurred_at, id) WHERE apple_user_id IS NOT NULL;
CREATE INDEX audit_events_client ON revoker.audit_events (client_id, occurred_at, id);
CREATE INDEX audit_events_occurred ON revoker.audit_events (occurred_at, id);
CREATE INDEX audit_events_reference ON revoker.audit_events (external_reference, occurred_at, id);
CREATE INDEX audit_events_request ON revoker.audit_events (request_id, occurred_at, id);
CREATE INDEX audit_events_txid ON revoker.audit_events (txid, id);

-- The stamp, as in 0017, for a partitioned trail:
--   - A row is routed to its month's partition on the column's default, a moment before this
--     trigger stamps it, and a trigger cannot move it to another. Should the month turn in
--     between, the row keeps the last microsecond of the month it was routed to. A time the
--     writer gave (not the default's) is refused, as it was always overwritten before.
--   - The chain's last row is looked for in this month's partition first (one index probe);
--     only a chain with no row this month (a new one, mostly) is looked for in every month.
CREATE OR REPLACE FUNCTION revoker.audit_events_stamp() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    head_seq bigint;
    head_hash bytea;
    head_at timestamptz;
    stamp timestamptz;
    month_start timestamptz;
    history boolean := current_setting('revoker.history_clock', true) = 'on';
BEGIN
    IF NEW.actor LIKE 'sql:%' AND NEW.actor <> 'sql:' || left(session_user::text, 190) THEN
        RAISE EXCEPTION 'an audit actor sql:<role> must name the role that writes it' USING ERRCODE = '42501';
    END IF;
    IF history AND NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false) THEN
        RAISE EXCEPTION 'revoker.history_clock is for a superuser writing a benchmark''s history' USING ERRCODE = '42501';
    END IF;
    NEW.chain_key := revoker.audit_chain_key(NEW.request_id, NEW.client_id);
    -- The two-key form keeps these locks apart from the single-key ones (migrations,
    -- checkpoints). Two chains whose keys hash alike only wait for each other.
    PERFORM pg_advisory_xact_lock(1920364289, hashtext(NEW.chain_key));
    stamp := CASE WHEN history THEN NEW.occurred_at ELSE clock_timestamp() END;
    month_start := date_trunc('month', stamp, 'UTC');
    -- Under the lock, the chain's last committed row (or this transaction's own) is its end:
    -- a later writer of the chain waits for this transaction to end.
    SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
    FROM revoker.audit_events
    WHERE chain_key = NEW.chain_key AND occurred_at >= month_start
    ORDER BY chain_seq DESC
    LIMIT 1;
    IF NOT FOUND THEN
        SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
        FROM revoker.audit_events
        WHERE chain_key = NEW.chain_key
        ORDER BY chain_seq DESC
        LIMIT 1;
    END IF;
    -- Stamped under the lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    IF history THEN
        IF NEW.occurred_at IS NULL OR NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'a history row must not occur before its chain''s previous row (%)', head_at USING ERRCODE = '22008';
        END IF;
    ELSIF date_trunc('month', NEW.occurred_at, 'UTC') = month_start THEN
        NEW.occurred_at := stamp;
    ELSIF stamp < month_start + interval '1 minute' AND NEW.occurred_at < month_start
        AND NEW.occurred_at >= month_start - interval '1 minute' THEN
        NEW.occurred_at := month_start - interval '1 microsecond';
        IF NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'the month turned while this audit row was written; write it again' USING ERRCODE = '40001';
        END IF;
    ELSE
        RAISE EXCEPTION 'an audit row''s time is the database''s to stamp: a given one (%) is refused', NEW.occurred_at
            USING ERRCODE = '42501';
    END IF;
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := coalesce(head_seq, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000');
    NEW.hash := revoker.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END;
$$;

CREATE TRIGGER audit_events_stamp BEFORE INSERT ON revoker.audit_events
    FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_stamp();
CREATE TRIGGER audit_events_no_update_or_delete BEFORE UPDATE OR DELETE ON revoker.audit_events
    FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON revoker.audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change();
CREATE TRIGGER audit_events_checkpoint_refused AFTER INSERT ON revoker.audit_events
    FOR EACH ROW WHEN (NEW.event = 'checkpoint_refused') EXECUTE FUNCTION revoker.outbox_checkpoint_refused();

ANALYZE revoker.audit_events;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (20, '0020_audit_partitions', NULL)
ON CONFLICT (version) DO NOTHING;
