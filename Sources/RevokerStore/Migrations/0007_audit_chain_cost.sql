-- 0007_audit_chain_cost.sql: the same chains and hashes as 0006, at a third of the cost.
--
-- Profiled with track_functions = 'all' over 20,000 inserted rows: the trigger cost about
-- 150 µs per row against 16 µs for stamping alone. Two causes:
--   - The encoding functions were declared IMMUTABLE but call STABLE ones (convert_to,
--     extract on a timestamptz), so PostgreSQL never inlined them: 19 SQL function calls per
--     row. Declared STABLE, which they are, they inline into one expression.
--   - Keeping each chain's head in revoker.audit_chains cost a SELECT ... FOR UPDATE and an
--     INSERT or UPDATE per row (about 80 µs) and made one chain written many times in one
--     transaction quadratic. Writers of a chain are now ordered by a transaction-level
--     advisory lock on the chain key, and the previous row is read through the
--     (chain_key, chain_seq) index. The heads are advanced by the checkpoint that covers
--     the rows (revoker.audit_advance_heads), off the path of every write.
-- The encoding, the hashes and every row already written are unchanged.

ALTER FUNCTION revoker.audit_field(text) STABLE;
ALTER FUNCTION revoker.audit_micros(timestamptz) STABLE;
ALTER FUNCTION revoker.audit_row_hash(bytea, revoker.audit_events) STABLE;

CREATE OR REPLACE FUNCTION revoker.audit_events_stamp() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    head_seq bigint;
    head_hash bytea;
BEGIN
    IF NEW.actor LIKE 'sql:%' AND NEW.actor <> 'sql:' || left(session_user::text, 190) THEN
        RAISE EXCEPTION 'an audit actor sql:<role> must name the role that writes it' USING ERRCODE = '42501';
    END IF;
    NEW.chain_key := revoker.audit_chain_key(NEW.request_id, NEW.client_id);
    -- The two-key form keeps these locks apart from the single-key ones (migrations,
    -- checkpoints). Two chains whose keys hash alike only wait for each other.
    PERFORM pg_advisory_xact_lock(1920364289, hashtext(NEW.chain_key));
    -- Under the lock, the chain's last committed row (or this transaction's own) is its end:
    -- a later writer of the chain waits for this transaction to end.
    SELECT chain_seq, hash INTO head_seq, head_hash
    FROM revoker.audit_events
    WHERE chain_key = NEW.chain_key
    ORDER BY chain_seq DESC
    LIMIT 1;
    -- Stamped under the lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    NEW.occurred_at := clock_timestamp();
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := coalesce(head_seq, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000');
    NEW.hash := revoker.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END;
$$;

-- Moves the heads of the chains that the newest checkpoint covers to their last covered row.
-- Called by the service in the transaction that stores the checkpoint. A head never moves
-- back, and it only ever names a row the trigger chained.
CREATE FUNCTION revoker.audit_advance_heads() RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slice_from xid8;
    slice_to xid8;
    advanced bigint;
BEGIN
    SELECT txid_from, txid_to INTO slice_from, slice_to
    FROM revoker.audit_checkpoints ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    INSERT INTO revoker.audit_chains AS c (chain_key, last_seq, last_hash)
    SELECT DISTINCT ON (chain_key) chain_key, chain_seq, hash
    FROM revoker.audit_events
    WHERE txid >= slice_from AND txid < slice_to
    ORDER BY chain_key, chain_seq DESC
    ON CONFLICT (chain_key) DO UPDATE SET last_seq = excluded.last_seq, last_hash = excluded.last_hash
    WHERE c.last_seq < excluded.last_seq;
    GET DIAGNOSTICS advanced = ROW_COUNT;
    RETURN advanced;
END;
$$;

REVOKE ALL ON FUNCTION revoker.audit_advance_heads() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (7, '0007_audit_chain_cost', NULL)
ON CONFLICT (version) DO NOTHING;
