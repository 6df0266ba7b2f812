-- 0017_audit_history_clock.sql: a history of years written through the real trigger.
--
-- Measuring the trail at ten million rows needs rows that occurred over years, chained,
-- checkpointed and stamped by this trigger as the service's are (revoker bench --history).
-- A session of a superuser may set revoker.history_clock = 'on': the trigger then keeps the
-- occurred_at the row brings instead of the clock's, and refuses one earlier than the
-- chain's previous row. Everything else is stamped as always.
--
-- This gives nobody a new power: a superuser can already disable triggers and write any
-- row with any hash. Either way `revoker audit verify` names a row dated before a
-- checkpoint that does not cover it (back-dated), short of checkpoints re-signed with the
-- audit key, which the database never holds. Any other role setting the variable is refused.

CREATE OR REPLACE FUNCTION revoker.audit_events_stamp() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    head_seq bigint;
    head_hash bytea;
    head_at timestamptz;
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
    SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
    FROM revoker.audit_events
    WHERE chain_key = NEW.chain_key
    ORDER BY chain_seq DESC
    LIMIT 1;
    -- Stamped under the lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    IF current_setting('revoker.history_clock', true) = 'on' THEN
        IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false) THEN
            RAISE EXCEPTION 'revoker.history_clock is for a superuser writing a benchmark''s history' USING ERRCODE = '42501';
        END IF;
        IF NEW.occurred_at IS NULL OR NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'a history row must not occur before its chain''s previous row (%)', head_at USING ERRCODE = '22008';
        END IF;
    ELSE
        NEW.occurred_at := clock_timestamp();
    END IF;
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := coalesce(head_seq, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000');
    NEW.hash := revoker.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END;
$$;

REVOKE ALL ON FUNCTION revoker.audit_events_stamp() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (17, '0017_audit_history_clock', NULL)
ON CONFLICT (version) DO NOTHING;
