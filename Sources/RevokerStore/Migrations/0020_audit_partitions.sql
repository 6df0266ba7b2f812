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

-- The stamp, as in 0017, for each partition: a trigger function of its own, made from this
-- template, so that the chain's last row is looked for in the partition by a plan cached for it
-- (5 µs). Looked for through the parent, a plan over every month cost 70 µs to 520 µs a row with
-- 28 months (measured in a plpgsql loop on the history of scripts/bench-history). Only a chain
-- with no row in this month (a new one, mostly) is looked for in every month, then among the
-- chains an archive took (revoker.audit_chains.archived_seq, migration 0022).
--
-- A row is routed to its month's partition on the column default, a moment before its trigger
-- stamps it, and a trigger cannot move it. Should the month turn in between, the row keeps the
-- last microsecond of the month it was routed to (its chain's last row is then looked for in
-- every month). A time the writer gave is refused unless it is in this month, where the
-- clock's is stamped over it, as before. A history row (0017) keeps its time.
--
-- The look-ups must use the chain index whatever the statistics say: a month's partition starts
-- empty, and a plan cached by a long-lived session while it was small scanned it whole for every
-- row as it grew (seen: a sequential scan per row of the current month, 390 µs a row at 2,000).
--
-- A partition made any other way has no stamp: its rows lack chain and hash, which are NOT NULL.
ALTER TABLE revoker.audit_chains
    ADD COLUMN archived_seq  bigint CHECK (archived_seq >= 1),
    ADD COLUMN archived_hash bytea  CHECK (octet_length(archived_hash) = 32);

CREATE FUNCTION revoker.audit_stamp_partition(partition text) RETURNS void
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $generate$
BEGIN
    EXECUTE format($template$
CREATE OR REPLACE FUNCTION revoker.%1$I() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $stamp$
DECLARE
    head_seq bigint;
    head_hash bytea;
    head_at timestamptz;
    found_head boolean := false;
    stamp timestamptz;
    month_start timestamptz;
    history boolean := current_setting('revoker.history_clock', true) = 'on';
BEGIN
    IF NEW.actor LIKE 'sql:%%' AND NEW.actor <> 'sql:' || left(session_user::text, 190) THEN
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
    -- a later writer of the chain waits for this transaction to end. Routed to this month, no
    -- later month can hold one of its rows.
    IF history OR NEW.occurred_at >= month_start THEN
        SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
        FROM revoker.%2$I
        WHERE chain_key = NEW.chain_key
        ORDER BY chain_seq DESC
        LIMIT 1;
        found_head := FOUND;
    END IF;
    IF NOT found_head THEN
        SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
        FROM revoker.audit_events
        WHERE chain_key = NEW.chain_key
        ORDER BY chain_seq DESC
        LIMIT 1;
        found_head := FOUND;
    END IF;
    IF NOT found_head THEN
        -- A chain whose rows are all archived goes on from its last archived row.
        SELECT archived_seq, archived_hash INTO head_seq, head_hash
        FROM revoker.audit_chains
        WHERE chain_key = NEW.chain_key AND archived_seq IS NOT NULL;
    END IF;
    -- Stamped under the lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    IF history THEN
        IF NEW.occurred_at IS NULL OR NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'a history row must not occur before its chain''s previous row (%%)', head_at USING ERRCODE = '22008';
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
        RAISE EXCEPTION 'an audit row''s time is the database''s to stamp: a given one (%%) is refused', NEW.occurred_at
            USING ERRCODE = '42501';
    END IF;
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := coalesce(head_seq, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000');
    NEW.hash := revoker.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END;
$stamp$;
$template$, partition || '_stamp', partition);
    EXECUTE format('REVOKE ALL ON FUNCTION revoker.%I() FROM PUBLIC', partition || '_stamp');
    EXECUTE format(
        'CREATE OR REPLACE TRIGGER audit_events_stamp BEFORE INSERT ON revoker.%I FOR EACH ROW EXECUTE FUNCTION revoker.%I()',
        partition, partition || '_stamp');
END;
$generate$;
REVOKE ALL ON FUNCTION revoker.audit_stamp_partition(text) FROM PUBLIC;

-- A month's partition, named and bounded in UTC, append-only by name too (a statement trigger
-- on the parent does not see a partition truncated by name); stamped unless told not to (the
-- migration stamps after copying). Returns whether it was added.
CREATE FUNCTION revoker.audit_add_partition(month timestamptz, stamped boolean) RETURNS boolean
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
AS $$
DECLARE
    first timestamptz := date_trunc('month', month);
    name text := 'audit_events_' || to_char(date_trunc('month', month), 'YYYY_MM');
BEGIN
    IF to_regclass('revoker.' || name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format(
        'CREATE TABLE revoker.%I PARTITION OF revoker.audit_events FOR VALUES FROM (%L) TO (%L)',
        name, first, first + interval '1 month');
    EXECUTE format(
        'CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON revoker.%I '
        'FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change()', name);
    IF stamped THEN
        PERFORM revoker.audit_stamp_partition(name);
    END IF;
    RETURN true;
END;
$$;
REVOKE ALL ON FUNCTION revoker.audit_add_partition(timestamptz, boolean) FROM PUBLIC;

-- Adds a partition for each month from first's through last's that has none.
CREATE FUNCTION revoker.audit_add_partitions(first timestamptz, last timestamptz) RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
AS $$
DECLARE
    month timestamptz := date_trunc('month', first);
    added integer := 0;
BEGIN
    WHILE month <= last LOOP
        IF revoker.audit_add_partition(month, true) THEN
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

SELECT revoker.audit_add_partition(month, false)
FROM generate_series(
    date_trunc('month', (SELECT coalesce(min(occurred_at), now()) FROM revoker.audit_events_unpartitioned), 'UTC'),
    now() + interval '3 months',
    interval '1 month') AS month;

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

-- The parent's stamp (0017) would be cloned to every partition: each has its own instead.
SELECT revoker.audit_stamp_partition(c.relname)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'revoker.audit_events'::regclass;
DROP FUNCTION revoker.audit_events_stamp();

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
