-- 0011_worker_liveness.sql: workers that say they are alive, so a dead worker's requests are
-- rescued in seconds instead of when their leases expire.
--
-- A worker holds a session-level advisory lock, revoker.worker_lock(owner) under namespace
-- 1920364290, on its own connection for as long as it lives, and registers its owner id here
-- after taking it. A rescuer that can take a registered owner's lock knows that the session
-- holding it is gone: it marks the owner (lock_lost_at), and when the lock is still free a few
-- seconds later it rescues the owner's running requests. A worker that got its lock back in
-- between clears the mark. Owners not registered here (older binaries) keep the lease alone.
CREATE TABLE revoker.workers (
    owner        text        PRIMARY KEY CHECK (char_length(owner) BETWEEN 1 AND 200),
    started_at   timestamptz NOT NULL DEFAULT now(),
    locked_at    timestamptz NOT NULL DEFAULT now(),
    lock_lost_at timestamptz
);

-- The second key of an owner's lock (the first is the namespace 1920364290).
CREATE FUNCTION revoker.worker_lock(owner text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT hashtext('revoker.worker:' || owner) $$;

-- Rescuing by owner reads the running requests of a few owners.
CREATE INDEX revocation_requests_lease_owner
    ON revoker.revocation_requests (lease_owner)
    WHERE state = 'running';

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (11, '0011_worker_liveness', NULL)
ON CONFLICT (version) DO NOTHING;
