-- 0027_lost_writes.sql: acknowledged writes a failover lost, recorded (issue 39, item 4).
--
-- With asynchronous replication a promoted standby may lack the newest commits. A process that
-- answered for one of them finds it missing once the database's timeline changes; it writes a
-- `write_lost` row on the app's chain and tells the app's backend with `database.write_lost`
-- (data.error_code names what was lost: request, grant, deletion, message or end).

ALTER TABLE revoker.outbox_events DROP CONSTRAINT outbox_events_type_check;
ALTER TABLE revoker.outbox_events ADD CONSTRAINT outbox_events_type_check CHECK (
    type IN ('revocation.succeeded', 'revocation.failed', 'revocation.cancelled', 'audit.checkpoint',
             'audit.checkpoint_refused', 'grant.held', 'grant.failed', 'account.deletion_requested',
             'account.deletion_completed', 'database.write_lost')
    OR (type ~ '^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,63}$' AND starts_with(type, provider || '.'))) NOT VALID;
ALTER TABLE revoker.outbox_events VALIDATE CONSTRAINT outbox_events_type_check;

ALTER TABLE revoker.audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE revoker.audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN (
    'enqueued', 'claimed', 'token_exchanged', 'token_validated', 'id_token_verified',
    'id_token_mismatch', 'revoked', 'retry_scheduled', 'rescued', 'released', 'failed',
    'succeeded', 'cancelled', 'credential_erased', 'credential_sealed', 'requeued',
    'app_paused', 'app_resumed', 'apple_error', 'note', 'apple_notification', 'exchange_started',
    'google_security_event', 'checkpoint_refused', 'grant_registered', 'grant_held',
    'deletion_requested', 'deletion_grant', 'deletion_completed', 'grant_ended', 'provider_message',
    'write_lost')) NOT VALID;
ALTER TABLE revoker.audit_events VALIDATE CONSTRAINT audit_events_event_check;

-- Status and /metrics count the last day's losses at every scrape: a partial index keeps that
-- off the trail's months of rows.
CREATE INDEX audit_events_write_lost ON revoker.audit_events (occurred_at) WHERE event = 'write_lost';

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (27, '0027_lost_writes', NULL)
ON CONFLICT (version) DO NOTHING;
