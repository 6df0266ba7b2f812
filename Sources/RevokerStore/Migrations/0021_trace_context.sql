-- 0021_trace_context.sql: the W3C trace context carried across the queue.
--
-- A request keeps the `traceparent` of the span that enqueued it, so that the worker's attempt
-- continues the app backend's trace however long the request waited, and its webhook events
-- carry it back. Grants and deletions keep theirs too: the requests they make inherit it.
--
-- The app writes the column itself. The SQL path (revoker.enqueue_revocation,
-- revoker.register_grant, revoker.request_account_deletion) takes it from the transaction's
-- setting `revoker.trace_parent`, which an app backend sets beside its own writes:
--     SELECT set_config('revoker.trace_parent', '00-<trace id>-<span id>-01', true);
-- A malformed value is ignored, as W3C Trace Context asks, never an error.
-- SECURITY DEFINER: the roles that write requests need no grant on deletions and grants.

CREATE FUNCTION revoker.is_trace_parent(p_value text) RETURNS boolean
    LANGUAGE sql
    IMMUTABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p_value ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       AND substr(p_value, 4, 32) <> repeat('0', 32) AND substr(p_value, 37, 16) <> repeat('0', 16)
$$;

ALTER TABLE revoker.revocation_requests ADD COLUMN trace_parent text CHECK (revoker.is_trace_parent(trace_parent));
ALTER TABLE revoker.grants ADD COLUMN trace_parent text CHECK (revoker.is_trace_parent(trace_parent));
ALTER TABLE revoker.account_deletions ADD COLUMN trace_parent text CHECK (revoker.is_trace_parent(trace_parent));

-- The transaction's `revoker.trace_parent` when it is well-formed; NULL otherwise.
CREATE FUNCTION revoker.session_trace_parent() RETURNS text
    LANGUAGE sql
    STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT v FROM (SELECT current_setting('revoker.trace_parent', true) AS v) s WHERE revoker.is_trace_parent(v)
$$;

-- A deletion's requests continue the deletion's trace; a grant's hold request the
-- registration's; anything else the session's, when it set one.
CREATE FUNCTION revoker.request_trace_parent() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.trace_parent IS NULL AND NEW.deletion_id IS NOT NULL THEN
        SELECT d.trace_parent INTO NEW.trace_parent FROM revoker.account_deletions d WHERE d.id = NEW.deletion_id;
    END IF;
    IF NEW.trace_parent IS NULL AND NEW.grant_id IS NOT NULL AND NEW.purpose = 'hold' THEN
        SELECT g.trace_parent INTO NEW.trace_parent FROM revoker.grants g WHERE g.id = NEW.grant_id;
    END IF;
    NEW.trace_parent := coalesce(NEW.trace_parent, revoker.session_trace_parent());
    RETURN NEW;
END;
$$;

CREATE FUNCTION revoker.session_trace_parent_default() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.trace_parent := coalesce(NEW.trace_parent, revoker.session_trace_parent());
    RETURN NEW;
END;
$$;

CREATE TRIGGER revocation_requests_trace_parent BEFORE INSERT ON revoker.revocation_requests
    FOR EACH ROW EXECUTE FUNCTION revoker.request_trace_parent();
CREATE TRIGGER grants_trace_parent BEFORE INSERT ON revoker.grants
    FOR EACH ROW EXECUTE FUNCTION revoker.session_trace_parent_default();
CREATE TRIGGER account_deletions_trace_parent BEFORE INSERT ON revoker.account_deletions
    FOR EACH ROW EXECUTE FUNCTION revoker.session_trace_parent_default();

-- The checks stay executable by PUBLIC (every writer's CHECK calls one); the triggers' are not.
REVOKE ALL ON FUNCTION revoker.request_trace_parent() FROM PUBLIC;
REVOKE ALL ON FUNCTION revoker.session_trace_parent_default() FROM PUBLIC;
