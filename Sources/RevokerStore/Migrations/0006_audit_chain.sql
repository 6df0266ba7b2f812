-- 0006_audit_chain.sql: the audit trail made tamper-evident.
--
-- Chains. Every audit row is bound into a hash chain: one chain per request (chain_key = its
-- id), one per app for events about the app as a whole ('app:' || client_id), one for the
-- rest ('revoker'). A row's hash is
--     sha256('revoker.audit.v1' || prev_hash || field || field || ...)
-- over the fields revoker.audit_row_hash lists, each encoded as 0x00 for NULL, else 0x01, its
-- length in bytes (4 bytes, big-endian) and its UTF-8 text; times are microseconds since 1970.
-- The first row of a chain follows 32 zero bytes. The chain's head (its last seq and hash)
-- is kept in revoker.audit_chains, whose row lock orders the writers of that chain alone: the
-- fleet is not serialised on one row.
--
-- Checkpoints. revoker.audit_checkpoints commits to every row written before it: checkpoint N
-- covers the rows whose transaction id lies in [txid_from, txid_to), txid_to being the oldest
-- transaction still running when it was taken, so nothing can later commit into a slice
-- already covered. It stores the slice's row count, the Merkle root (RFC 6962) over the rows'
-- hashes in id order, and the previous checkpoint's hash, and is signed with an Ed25519 key the
-- service holds in a file, never in the database. The service computes and signs them.
--
-- What this gives: anyone who can rewrite the tables (a superuser disabling triggers) can no
-- longer change, remove, reorder or add a row without `revoker audit verify` naming it, short
-- of also holding the signing key. Rows written since the last checkpoint (a minute by
-- default) are protected by their chains and heads only.

-- ---------------------------------------------------------------------------------------
-- Columns, the heads, the genesis
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.audit_events
    ADD COLUMN chain_key text,
    ADD COLUMN chain_seq bigint,
    ADD COLUMN prev_hash bytea,
    ADD COLUMN hash      bytea,
    ADD COLUMN txid      xid8;

CREATE TABLE revoker.audit_chains (
    chain_key  text   PRIMARY KEY,
    last_seq   bigint NOT NULL CHECK (last_seq >= 1),
    last_hash  bytea  NOT NULL CHECK (octet_length(last_hash) = 32)
) WITH (fillfactor = 80);

-- Rows that existed before this migration are chained by it, in id order; the record says
-- when and how many, since their hashes prove nothing about the time before.
CREATE TABLE revoker.audit_genesis (
    migrated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    rows_brought_in bigint      NOT NULL,
    last_id         bigint,
    txid            xid8        NOT NULL DEFAULT pg_current_xact_id()
);

-- ---------------------------------------------------------------------------------------
-- The canonical encoding (reproduced by the Swift verifier and by receipts' verifiers)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION revoker.audit_field(value text) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN value IS NULL THEN '\x00'::bytea
                ELSE '\x01'::bytea || int4send(octet_length(convert_to(value, 'UTF8'))) || convert_to(value, 'UTF8')
           END
$$;

-- Exact on every supported version (extract(epoch) is a double before PostgreSQL 14).
CREATE FUNCTION revoker.audit_micros(at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT floor(extract(epoch FROM at))::bigint * 1000000 + extract(microseconds FROM at)::bigint % 1000000
$$;

CREATE FUNCTION revoker.audit_row_hash(prev bytea, e revoker.audit_events) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
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

CREATE FUNCTION revoker.audit_chain_key(request_id uuid, client_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN request_id IS NOT NULL THEN request_id::text
                WHEN client_id IS NOT NULL THEN 'app:' || client_id
                ELSE 'revoker' END
$$;

-- ---------------------------------------------------------------------------------------
-- Existing rows: chained in id order, as of this migration
-- ---------------------------------------------------------------------------------------
ALTER TABLE revoker.audit_events DISABLE TRIGGER audit_events_no_update_or_delete;

DO $$
DECLARE
    r revoker.audit_events;
    head revoker.audit_chains;
    brought bigint := 0;
BEGIN
    FOR r IN SELECT * FROM revoker.audit_events ORDER BY id LOOP
        r.chain_key := revoker.audit_chain_key(r.request_id, r.client_id);
        r.txid := pg_current_xact_id();
        SELECT * INTO head FROM revoker.audit_chains WHERE chain_key = r.chain_key;
        r.chain_seq := coalesce(head.last_seq, 0) + 1;
        r.prev_hash := coalesce(head.last_hash, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea);
        r.hash := revoker.audit_row_hash(r.prev_hash, r);
        UPDATE revoker.audit_events
        SET chain_key = r.chain_key, chain_seq = r.chain_seq, prev_hash = r.prev_hash, hash = r.hash, txid = r.txid
        WHERE id = r.id;
        INSERT INTO revoker.audit_chains AS c (chain_key, last_seq, last_hash)
        VALUES (r.chain_key, r.chain_seq, r.hash)
        ON CONFLICT (chain_key) DO UPDATE SET last_seq = excluded.last_seq, last_hash = excluded.last_hash;
        brought := brought + 1;
    END LOOP;
    INSERT INTO revoker.audit_genesis (rows_brought_in, last_id)
    SELECT brought, max(id) FROM revoker.audit_events;
END;
$$;

ALTER TABLE revoker.audit_events ENABLE TRIGGER audit_events_no_update_or_delete;

-- NOT NULL and the unique chain position hold even for a session that disables triggers.
ALTER TABLE revoker.audit_events
    ALTER COLUMN chain_key SET NOT NULL,
    ALTER COLUMN chain_seq SET NOT NULL,
    ALTER COLUMN prev_hash SET NOT NULL,
    ALTER COLUMN hash SET NOT NULL,
    ALTER COLUMN txid SET NOT NULL;
CREATE UNIQUE INDEX audit_events_chain ON revoker.audit_events (chain_key, chain_seq);
CREATE INDEX audit_events_txid ON revoker.audit_events (txid, id);

-- ---------------------------------------------------------------------------------------
-- New rows: stamped and chained by the database. SECURITY DEFINER: the service's role
-- appends rows but cannot touch the heads.
-- ---------------------------------------------------------------------------------------
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
    LOOP
        SELECT last_seq, last_hash INTO head_seq, head_hash
        FROM revoker.audit_chains WHERE chain_key = NEW.chain_key FOR UPDATE;
        EXIT WHEN FOUND;
        -- A new chain: claim its head, or take the one a concurrent writer just claimed.
        INSERT INTO revoker.audit_chains (chain_key, last_seq, last_hash)
        VALUES (NEW.chain_key, 1, '\x0000000000000000000000000000000000000000000000000000000000000000')
        ON CONFLICT (chain_key) DO NOTHING;
        IF FOUND THEN
            head_seq := 0;
            head_hash := '\x0000000000000000000000000000000000000000000000000000000000000000';
            EXIT;
        END IF;
    END LOOP;
    -- Stamped under the head's lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    NEW.occurred_at := clock_timestamp();
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := head_seq + 1;
    NEW.prev_hash := head_hash;
    NEW.hash := revoker.audit_row_hash(head_hash, NEW);
    UPDATE revoker.audit_chains SET last_seq = NEW.chain_seq, last_hash = NEW.hash WHERE chain_key = NEW.chain_key;
    RETURN NEW;
END;
$$;

-- ---------------------------------------------------------------------------------------
-- Checkpoints (append-only)
-- ---------------------------------------------------------------------------------------
CREATE TABLE revoker.audit_checkpoints (
    seq           bigint      PRIMARY KEY CHECK (seq >= 1),
    created_at    timestamptz NOT NULL,
    txid_from     xid8        NOT NULL UNIQUE,
    txid_to       xid8        NOT NULL,
    row_count     bigint      NOT NULL CHECK (row_count >= 0),
    merkle_root   bytea       NOT NULL CHECK (octet_length(merkle_root) = 32),
    previous_hash bytea       NOT NULL CHECK (octet_length(previous_hash) = 32),
    hash          bytea       NOT NULL CHECK (octet_length(hash) = 32),
    key_id        text        NOT NULL CHECK (key_id ~ '^[0-9a-f]{16}$'),
    signature     bytea       NOT NULL CHECK (octet_length(signature) = 64),
    CONSTRAINT audit_checkpoints_slice CHECK (txid_to > txid_from)
);

CREATE TRIGGER audit_checkpoints_no_update_or_delete
    BEFORE UPDATE OR DELETE ON revoker.audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER audit_checkpoints_no_truncate
    BEFORE TRUNCATE ON revoker.audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER audit_chains_no_truncate
    BEFORE TRUNCATE ON revoker.audit_chains
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER audit_genesis_no_change
    BEFORE UPDATE OR DELETE ON revoker.audit_genesis
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

REVOKE ALL ON FUNCTION revoker.audit_events_stamp() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (6, '0006_audit_chain', NULL)
ON CONFLICT (version) DO NOTHING;
