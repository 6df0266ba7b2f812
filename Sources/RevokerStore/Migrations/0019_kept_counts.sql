-- 0019_kept_counts.sql: counts of requests and grants that status reads without scanning years.
--
-- `revoker status`, /ui/status and the metrics counted requests by state and outcome and grants
-- by state over whole tables: 461 ms and 660 ms at ten million audit rows (docs/benchmarks.md).
-- Statement-level triggers with transition tables now append what each statement changed, one
-- row per changed group, to a table of deltas; a read sums it, and revoker.compact_counts()
-- folds it into one row per group now and then. Appending takes no lock another writer waits
-- for: workers finishing requests at once never queue behind a count, nor deadlock over one.
--
-- The triggers fire ALWAYS, also for a session replicating or writing a benchmark's history with
-- session_replication_role = replica. TRUNCATE empties the counts with the table.
-- SECURITY DEFINER: the roles that write requests and grants need no grant on the counts.

CREATE TABLE revoker.request_counts (
    client_id text   NOT NULL,
    state     text   NOT NULL,
    outcome   text   NOT NULL,  -- '' while pending or running
    n         bigint NOT NULL
);

CREATE TABLE revoker.grant_counts (
    client_id text   NOT NULL,
    provider  text   NOT NULL,
    state     text   NOT NULL,
    n         bigint NOT NULL
);

CREATE FUNCTION revoker.count_requests() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Each branch names only the transition tables its trigger has (a statement is planned when
    -- first run, per trigger).
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM revoker.request_counts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO revoker.request_counts (client_id, state, outcome, n)
        SELECT client_id, state, coalesce(outcome, ''), count(*) FROM changed_new GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO revoker.request_counts (client_id, state, outcome, n)
        SELECT client_id, state, coalesce(outcome, ''), -count(*) FROM changed_old GROUP BY 1, 2, 3;
    ELSE
        -- Most updates (leases, attempts, times) change no count: their groups sum to zero.
        INSERT INTO revoker.request_counts (client_id, state, outcome, n)
        SELECT client_id, state, coalesce(outcome, ''), sum(d)
        FROM (SELECT client_id, state, outcome, 1 AS d FROM changed_new
              UNION ALL SELECT client_id, state, outcome, -1 FROM changed_old) AS x
        GROUP BY 1, 2, 3
        HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION revoker.count_grants() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM revoker.grant_counts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO revoker.grant_counts (client_id, provider, state, n)
        SELECT client_id, provider, state, count(*) FROM changed_new GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO revoker.grant_counts (client_id, provider, state, n)
        SELECT client_id, provider, state, -count(*) FROM changed_old GROUP BY 1, 2, 3;
    ELSE
        INSERT INTO revoker.grant_counts (client_id, provider, state, n)
        SELECT client_id, provider, state, sum(d)
        FROM (SELECT client_id, provider, state, 1 AS d FROM changed_new
              UNION ALL SELECT client_id, provider, state, -1 FROM changed_old) AS x
        GROUP BY 1, 2, 3
        HAVING sum(d) <> 0;
    END IF;
    RETURN NULL;
END;
$$;

-- Folds the deltas into one row per group. The rows it deletes are the ones it sums, in one
-- statement: a delta committed meanwhile stays for the next fold, and two folds at once never
-- count a row twice (the second finds it deleted).
CREATE FUNCTION revoker.compact_counts() RETURNS void
    LANGUAGE sql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH moved AS (DELETE FROM revoker.request_counts RETURNING client_id, state, outcome, n)
    INSERT INTO revoker.request_counts (client_id, state, outcome, n)
    SELECT client_id, state, outcome, sum(n) FROM moved GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
    WITH moved AS (DELETE FROM revoker.grant_counts RETURNING client_id, provider, state, n)
    INSERT INTO revoker.grant_counts (client_id, provider, state, n)
    SELECT client_id, provider, state, sum(n) FROM moved GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
$$;

-- The triggers first: writers wait for this migration from here, so the counts filled below miss
-- nothing and count nothing twice.
CREATE TRIGGER revocation_requests_count_insert AFTER INSERT ON revoker.revocation_requests
    REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();
CREATE TRIGGER revocation_requests_count_update AFTER UPDATE ON revoker.revocation_requests
    REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();
CREATE TRIGGER revocation_requests_count_delete AFTER DELETE ON revoker.revocation_requests
    REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();
CREATE TRIGGER revocation_requests_count_truncate AFTER TRUNCATE ON revoker.revocation_requests
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();
ALTER TABLE revoker.revocation_requests
    ENABLE ALWAYS TRIGGER revocation_requests_count_insert, ENABLE ALWAYS TRIGGER revocation_requests_count_update,
    ENABLE ALWAYS TRIGGER revocation_requests_count_delete, ENABLE ALWAYS TRIGGER revocation_requests_count_truncate;

CREATE TRIGGER grants_count_insert AFTER INSERT ON revoker.grants
    REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();
CREATE TRIGGER grants_count_update AFTER UPDATE ON revoker.grants
    REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();
CREATE TRIGGER grants_count_delete AFTER DELETE ON revoker.grants
    REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();
CREATE TRIGGER grants_count_truncate AFTER TRUNCATE ON revoker.grants
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();
ALTER TABLE revoker.grants
    ENABLE ALWAYS TRIGGER grants_count_insert, ENABLE ALWAYS TRIGGER grants_count_update,
    ENABLE ALWAYS TRIGGER grants_count_delete, ENABLE ALWAYS TRIGGER grants_count_truncate;

INSERT INTO revoker.request_counts (client_id, state, outcome, n)
SELECT client_id, state, coalesce(outcome, ''), count(*) FROM revoker.revocation_requests GROUP BY 1, 2, 3;
INSERT INTO revoker.grant_counts (client_id, provider, state, n)
SELECT client_id, provider, state, count(*) FROM revoker.grants GROUP BY 1, 2, 3;

REVOKE ALL ON FUNCTION revoker.count_requests() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.count_grants() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.compact_counts() FROM PUBLIC;

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (19, '0019_kept_counts', NULL)
ON CONFLICT (version) DO NOTHING;
