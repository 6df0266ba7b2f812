-- 0018_years_of_data.sql: what a trail of years needs (issue 27, docs/benchmarks.md).
--
-- A request looked up by its external reference alone (GET /v1/revocations?external_reference=,
-- an admin's key) scanned every request newest first: the reference index leads with client_id.
-- Built CONCURRENTLY would not run inside the migration's transaction; on a table of millions
-- this takes seconds (docs/benchmarks.md).
CREATE INDEX IF NOT EXISTS revocation_requests_external_reference
    ON revoker.revocation_requests (external_reference, created_at);

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (18, '0018_years_of_data', NULL)
ON CONFLICT (version) DO NOTHING;
