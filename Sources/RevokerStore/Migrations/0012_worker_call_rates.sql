-- 0012_worker_call_rates.sql: each live worker publishes the calls per second it makes to each
-- app, so that `revoker status` shows the observed rate beside the configured limit, and each
-- worker divides the limits by the number of live workers.
ALTER TABLE revoker.workers
    ADD COLUMN call_rates    jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(call_rates) = 'object'),
    ADD COLUMN call_rates_at timestamptz;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (12, '0012_worker_call_rates', NULL)
ON CONFLICT (version) DO NOTHING;
