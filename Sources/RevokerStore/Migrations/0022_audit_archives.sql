-- 0022_audit_archives.sql: months of the trail archived to a file and dropped (issue 27).
--
-- `revoker audit archive --before YYYY-MM` writes the months before it to a file that
-- `revoker audit verify-archive` checks offline, then records here what left, and detaches
-- and drops those months' partitions, in one transaction, after the file is on disk.
--
--   - revoker.audit_archives: one row per archive (what, where, its SHA-256, by whom).
--   - revoker.audit_chains.archived_seq/_hash: each archived chain's last archived row. The
--     live trail's rows of the chain follow it (the stamp goes on from it when no row of the
--     chain is left), and `audit verify` starts the chain there.
--   - revoker.audit_archived_checkpoints: each checkpoint that covers archived rows, with how
--     many; for one that also covers rows still here (or in a later archive), the archived
--     rows' leaves (id, 8 bytes big-endian, then the 32-byte hash, in id order), so that its
--     Merkle root is still recomputed from what is here.
--   - revoker.audit_archived_requests: each archived request as the compliance search shows it,
--     with the archive that holds its rows.
-- The checkpoints themselves stay: after the file is deleted at the end of retention, they
-- still show that rows existed, how many, and under which root.

CREATE TABLE revoker.audit_archives (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    before       timestamptz NOT NULL,
    months       text[]      NOT NULL,
    file_name    text        NOT NULL CHECK (char_length(file_name) BETWEEN 1 AND 1000),
    file_sha256  bytea       NOT NULL CHECK (octet_length(file_sha256) = 32),
    row_count    bigint      NOT NULL CHECK (row_count >= 0),
    first_id     bigint,
    last_id      bigint,
    archived_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    archived_by  text        NOT NULL DEFAULT session_user
);
CREATE TRIGGER audit_archives_no_change BEFORE UPDATE OR DELETE ON revoker.audit_archives
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER audit_archives_no_truncate BEFORE TRUNCATE ON revoker.audit_archives
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

ALTER TABLE revoker.audit_chains
    ADD COLUMN archived_seq  bigint CHECK (archived_seq >= 1),
    ADD COLUMN archived_hash bytea  CHECK (octet_length(archived_hash) = 32);

CREATE TABLE revoker.audit_archived_checkpoints (
    seq            bigint PRIMARY KEY REFERENCES revoker.audit_checkpoints (seq),
    archive_id     bigint NOT NULL REFERENCES revoker.audit_archives (id),
    archived_rows  bigint NOT NULL CHECK (archived_rows >= 1),
    leaves         bytea  CHECK (octet_length(leaves) % 40 = 0)
);
-- What the compliance search finds of an archived request (its enqueued row's id and time
-- keep the search's order and cursor), and in which archive its rows now are.
CREATE TABLE revoker.audit_archived_requests (
    request_id          uuid        PRIMARY KEY,
    archive_id          bigint      NOT NULL REFERENCES revoker.audit_archives (id),
    enqueued_id         bigint      NOT NULL,
    requested_at        timestamptz NOT NULL,
    requested_by        text        NOT NULL,
    client_id           text,
    external_reference  text,
    user_id             text,
    outcome             text,
    finished_at         timestamptz
);
CREATE INDEX audit_archived_requests_requested ON revoker.audit_archived_requests (requested_at, enqueued_id);
CREATE INDEX audit_archived_requests_reference ON revoker.audit_archived_requests (external_reference, requested_at);
CREATE INDEX audit_archived_requests_user ON revoker.audit_archived_requests (user_id, requested_at) WHERE user_id IS NOT NULL;
CREATE INDEX audit_archived_requests_client ON revoker.audit_archived_requests (client_id, requested_at);

CREATE TRIGGER audit_archived_checkpoints_no_truncate BEFORE TRUNCATE ON revoker.audit_archived_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

CREATE OR REPLACE FUNCTION revoker.audit_add_partitions(first timestamptz, last timestamptz) RETURNS integer
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
    IF month < (SELECT max(before) FROM revoker.audit_archives) THEN
        RAISE EXCEPTION 'the months before % are archived: no partition is added for them', (SELECT max(before) FROM revoker.audit_archives)
            USING ERRCODE = '22023';
    END IF;
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
    IF NOT FOUND THEN
        -- A chain whose rows are all archived goes on from its last archived row.
        SELECT archived_seq, archived_hash INTO head_seq, head_hash
        FROM revoker.audit_chains
        WHERE chain_key = NEW.chain_key AND archived_seq IS NOT NULL;
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


INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (22, '0022_audit_archives', NULL)
ON CONFLICT (version) DO NOTHING;
