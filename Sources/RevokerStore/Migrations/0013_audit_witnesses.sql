-- 0013_audit_witnesses.sql: checkpoints that a held-open transaction cannot stall, and copies
-- of every checkpoint outside the database.
--
-- Open transactions. A checkpoint used to cover [txid_from, txid_to) with txid_to the oldest
-- transaction still running, so one idle transaction (an auditor's, the app's own) stopped
-- every checkpoint. Now txid_to is the snapshot's xmax and the checkpoint lists what it leaves
-- out: open_txids, the transactions below txid_to still running when it was taken. A later
-- checkpoint takes each of them once it has ended (late_txids). A row of transaction t is in
-- the slice of the first checkpoint with (txid_from <= t < txid_to or t in late_txids) and t
-- not in open_txids. Both lists are signed; checkpoints with empty lists are signed as before.
--
-- Witnesses. Every checkpoint is published as an `audit.checkpoint` event to every registered
-- app (the feed and the webhooks), carrying the whole signed checkpoint, so app backends hold
-- copies the database owner cannot rewrite. A signer that finds the history no longer extends
-- what it signed writes a `checkpoint_refused` audit row, published as
-- `audit.checkpoint_refused`.

ALTER TABLE revoker.audit_checkpoints
    ADD COLUMN open_txids xid8[] NOT NULL DEFAULT '{}',
    ADD COLUMN late_txids xid8[] NOT NULL DEFAULT '{}';

CREATE OR REPLACE FUNCTION revoker.audit_advance_heads() RETURNS bigint
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    slice_from xid8;
    slice_to xid8;
    slice_open xid8[];
    slice_late xid8[];
    advanced bigint;
BEGIN
    SELECT txid_from, txid_to, open_txids, late_txids INTO slice_from, slice_to, slice_open, slice_late
    FROM revoker.audit_checkpoints ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    -- A chain's writers take turns (the stamp trigger's lock), so what a checkpoint covers of a
    -- chain is a prefix of it: its last covered row is the new head.
    INSERT INTO revoker.audit_chains AS c (chain_key, last_seq, last_hash)
    SELECT DISTINCT ON (chain_key) chain_key, chain_seq, hash
    FROM revoker.audit_events
    WHERE ((txid >= slice_from AND txid < slice_to) OR txid = ANY(slice_late)) AND txid <> ALL(slice_open)
    ORDER BY chain_key, chain_seq DESC
    ON CONFLICT (chain_key) DO UPDATE SET last_seq = excluded.last_seq, last_hash = excluded.last_hash
    WHERE c.last_seq < excluded.last_seq;
    GET DIAGNOSTICS advanced = ROW_COUNT;
    RETURN advanced;
END;
$$;

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event', 'checkpoint_refused')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

ALTER TABLE revoker.outbox_events ADD COLUMN checkpoint jsonb;
ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (type IN (
    'revocation.succeeded', 'revocation.failed', 'revocation.cancelled',
    'apple.consent_revoked', 'apple.account_deleted', 'apple.email_disabled', 'apple.email_enabled',
    'google.sessions_revoked', 'google.tokens_revoked', 'google.token_revoked', 'google.account_disabled',
    'google.account_enabled', 'google.account_purged', 'google.account_credential_change_required',
    'google.verification', 'audit.checkpoint', 'audit.checkpoint_refused')) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

-- A checkpoint as JSON: the fields AuditCheckpointRecord reads, enough to check its signature.
CREATE FUNCTION revoker.audit_checkpoint_record(c revoker.audit_checkpoints) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
        'seq', c.seq,
        'created_at_us', revoker.audit_micros(c.created_at),
        'txid_from', c.txid_from::text::numeric,
        'txid_to', c.txid_to::text::numeric,
        'row_count', c.row_count,
        'merkle_root', encode(c.merkle_root, 'hex'),
        'previous_hash', encode(c.previous_hash, 'hex'),
        'hash', encode(c.hash, 'hex'),
        'open_txids', (SELECT coalesce(jsonb_agg(t::text::numeric ORDER BY t::text::numeric), '[]') FROM unnest(c.open_txids) AS t),
        'late_txids', (SELECT coalesce(jsonb_agg(t::text::numeric ORDER BY t::text::numeric), '[]') FROM unnest(c.late_txids) AS t),
        'key_id', c.key_id,
        'signature', translate(encode(c.signature, 'base64'), E'\n', ''))
$$;

CREATE FUNCTION revoker.outbox_audit_checkpoint() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, checkpoint)
    SELECT 'audit.checkpoint', a.client_id, revoker.audit_checkpoint_record(NEW)
    FROM revoker.apps a ORDER BY a.client_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER audit_checkpoints_outbox
    AFTER INSERT ON revoker.audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION revoker.outbox_audit_checkpoint();

-- The refusal's audit row names why in its detail; the event carries its code (error_code).
CREATE FUNCTION revoker.outbox_checkpoint_refused() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, error_code)
    SELECT 'audit.checkpoint_refused', a.client_id, left(split_part(coalesce(NEW.detail, ''), ' ', 1), 100)
    FROM revoker.apps a ORDER BY a.client_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER audit_events_checkpoint_refused
    AFTER INSERT ON revoker.audit_events
    FOR EACH ROW
    WHEN (NEW.event = 'checkpoint_refused')
    EXECUTE FUNCTION revoker.outbox_checkpoint_refused();

CREATE OR REPLACE VIEW revoker.events AS
    SELECT e.txid, e.position, e.txid::text || '-' || e.position::text AS cursor,
           e.id, e.type, e.client_id, e.occurred_at, e.request_id, e.external_reference, e.apple_user_id,
           e.outcome, e.error_code, e.notification_id, e.event_time, e.provider, e.checkpoint
    FROM revoker.outbox_events e
    WHERE e.txid < pg_snapshot_xmin(pg_current_snapshot());

REVOKE ALL ON FUNCTION revoker.audit_checkpoint_record(revoker.audit_checkpoints) FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_audit_checkpoint() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.outbox_checkpoint_refused() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (13, '0013_audit_witnesses', NULL)
ON CONFLICT (version) DO NOTHING;
