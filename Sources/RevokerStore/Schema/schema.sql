-- The revoker schema at migration 0029_erasure_requests.sql, as pg_dump prints it.
-- Written by scripts/schema; do not edit: write a migration, then run scripts/schema.
-- Left out: owners and privileges (deploy/postgres/roles.sql grants them) and the audit
-- trail's monthly partitions audit_events_YYYY_MM (revoker.audit_add_partition makes them).
--
-- PostgreSQL database dump
--

--
-- Name: revoker; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA revoker;

--
-- Name: account_lock_key(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.account_lock_key(p_account_reference text) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT hashtextextended('revoker.account:' || p_account_reference, 0)
$$;

--
-- Name: audit_add_partition(timestamp with time zone, boolean); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_add_partition(month timestamp with time zone, stamped boolean) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    first timestamptz := date_trunc('month', month);
    name text := 'audit_events_' || to_char(date_trunc('month', month), 'YYYY_MM');
BEGIN
    IF to_regclass('revoker.' || name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format(
        'CREATE TABLE revoker.%I PARTITION OF revoker.audit_events FOR VALUES FROM (%L) TO (%L)',
        name, first, first + interval '1 month');
    EXECUTE format(
        'CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON revoker.%I '
        'FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change()', name);
    IF stamped THEN
        PERFORM revoker.audit_stamp_partition(name);
    END IF;
    RETURN true;
END;
$$;

--
-- Name: audit_add_partitions(timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_add_partitions(first timestamp with time zone, last timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    month timestamptz := date_trunc('month', first);
    archived timestamptz := (SELECT max(before) FROM revoker.audit_archives);
    added integer := 0;
BEGIN
    IF month < archived THEN
        RAISE EXCEPTION 'the months before % are archived: no partition is added for them', archived USING ERRCODE = '22023';
    END IF;
    WHILE month <= last LOOP
        IF revoker.audit_add_partition(month, true) THEN
            added := added + 1;
        END IF;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END;
$$;

--
-- Name: audit_advance_heads(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_advance_heads() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: audit_chain_key(uuid, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_chain_key(request_id uuid, client_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN request_id IS NOT NULL THEN request_id::text
                WHEN client_id IS NOT NULL THEN 'app:' || client_id
                ELSE 'revoker' END
$$;

--
-- Name: audit_checkpoints; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_checkpoints (
    seq bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    txid_from xid8 NOT NULL,
    txid_to xid8 NOT NULL,
    row_count bigint NOT NULL,
    merkle_root bytea NOT NULL,
    previous_hash bytea NOT NULL,
    hash bytea NOT NULL,
    key_id text NOT NULL,
    signature bytea NOT NULL,
    open_txids xid8[] DEFAULT '{}'::xid8[] NOT NULL,
    late_txids xid8[] DEFAULT '{}'::xid8[] NOT NULL,
    CONSTRAINT audit_checkpoints_hash_check CHECK ((octet_length(hash) = 32)),
    CONSTRAINT audit_checkpoints_key_id_check CHECK ((key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT audit_checkpoints_merkle_root_check CHECK ((octet_length(merkle_root) = 32)),
    CONSTRAINT audit_checkpoints_previous_hash_check CHECK ((octet_length(previous_hash) = 32)),
    CONSTRAINT audit_checkpoints_row_count_check CHECK ((row_count >= 0)),
    CONSTRAINT audit_checkpoints_seq_check CHECK ((seq >= 1)),
    CONSTRAINT audit_checkpoints_signature_check CHECK ((octet_length(signature) = 64)),
    CONSTRAINT audit_checkpoints_slice CHECK ((txid_to > txid_from))
);

--
-- Name: audit_checkpoint_record(revoker.audit_checkpoints); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_checkpoint_record(c revoker.audit_checkpoints) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: audit_ensure_partitions(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_ensure_partitions() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '1s'
    AS $$
BEGIN
    RETURN revoker.audit_add_partitions(now(), now() + interval '3 months');
EXCEPTION WHEN lock_not_available THEN
    RETURN 0;
END;
$$;

--
-- Name: audit_events_refuse_change(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_events_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION 'revoker.audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'RV403';
END;
$$;

--
-- Name: audit_field(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_field(value text) RETURNS bytea
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN value IS NULL THEN '\x00'::bytea
                ELSE '\x01'::bytea || int4send(octet_length(convert_to(value, 'UTF8'))) || convert_to(value, 'UTF8')
           END
$$;

--
-- Name: audit_micros(timestamp with time zone); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_micros(at timestamp with time zone) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT floor(extract(epoch FROM at))::bigint * 1000000 + extract(microseconds FROM at)::bigint % 1000000
$$;

--
-- Name: audit_events; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_events (
    id bigint NOT NULL,
    occurred_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    request_id uuid,
    client_id text,
    external_reference text,
    apple_user_id text,
    event text NOT NULL,
    attempt integer,
    actor text NOT NULL,
    apple_endpoint text,
    http_status integer,
    apple_error text,
    apple_error_description text,
    latency_ms integer,
    detail text,
    recorded_by text,
    chain_key text NOT NULL,
    chain_seq bigint NOT NULL,
    prev_hash bytea NOT NULL,
    hash bytea NOT NULL,
    txid xid8 NOT NULL,
    CONSTRAINT audit_events_actor_check CHECK (((char_length(actor) >= 1) AND (char_length(actor) <= 200))),
    CONSTRAINT audit_events_apple_endpoint_check CHECK ((char_length(apple_endpoint) <= 200)),
    CONSTRAINT audit_events_apple_error_check CHECK ((char_length(apple_error) <= 100)),
    CONSTRAINT audit_events_apple_error_description_check CHECK ((char_length(apple_error_description) <= 500)),
    CONSTRAINT audit_events_apple_user_id_check CHECK ((char_length(apple_user_id) <= 255)),
    CONSTRAINT audit_events_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT audit_events_client_id_check CHECK ((char_length(client_id) <= 255)),
    CONSTRAINT audit_events_detail_check CHECK ((char_length(detail) <= 500)),
    CONSTRAINT audit_events_event_check CHECK ((event = ANY (ARRAY['enqueued'::text, 'claimed'::text, 'token_exchanged'::text, 'token_validated'::text, 'id_token_verified'::text, 'id_token_mismatch'::text, 'revoked'::text, 'retry_scheduled'::text, 'rescued'::text, 'released'::text, 'failed'::text, 'succeeded'::text, 'cancelled'::text, 'credential_erased'::text, 'credential_sealed'::text, 'requeued'::text, 'app_paused'::text, 'app_resumed'::text, 'apple_error'::text, 'note'::text, 'apple_notification'::text, 'exchange_started'::text, 'google_security_event'::text, 'checkpoint_refused'::text, 'grant_registered'::text, 'grant_held'::text, 'deletion_requested'::text, 'deletion_grant'::text, 'deletion_completed'::text, 'grant_ended'::text, 'provider_message'::text, 'write_lost'::text]))),
    CONSTRAINT audit_events_external_reference_check CHECK ((char_length(external_reference) <= 255)),
    CONSTRAINT audit_events_http_status_check CHECK (((http_status >= 100) AND (http_status <= 599))),
    CONSTRAINT audit_events_latency_ms_check CHECK ((latency_ms >= 0))
)
PARTITION BY RANGE (occurred_at);

--
-- Name: audit_row_hash(bytea, revoker.audit_events); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_row_hash(prev bytea, e revoker.audit_events) RETURNS bytea
    LANGUAGE sql STABLE PARALLEL SAFE
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

--
-- Name: audit_stamp_partition(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.audit_stamp_partition(partition text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
BEGIN
    EXECUTE format($template$
CREATE OR REPLACE FUNCTION revoker.%1$I() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET enable_seqscan = off
AS $stamp$
DECLARE
    head_seq bigint;
    head_hash bytea;
    head_at timestamptz;
    found_head boolean := false;
    stamp timestamptz;
    month_start timestamptz;
    history boolean := current_setting('revoker.history_clock', true) = 'on';
BEGIN
    IF NEW.actor LIKE 'sql:%%' AND NEW.actor <> 'sql:' || left(session_user::text, 190) THEN
        RAISE EXCEPTION 'an audit actor sql:<role> must name the role that writes it' USING ERRCODE = '42501';
    END IF;
    IF history AND NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false) THEN
        RAISE EXCEPTION 'revoker.history_clock is for a superuser writing a benchmark''s history' USING ERRCODE = '42501';
    END IF;
    NEW.chain_key := revoker.audit_chain_key(NEW.request_id, NEW.client_id);
    -- The two-key form keeps these locks apart from the single-key ones (migrations,
    -- checkpoints). Two chains whose keys hash alike only wait for each other.
    PERFORM pg_advisory_xact_lock(1920364289, hashtext(NEW.chain_key));
    stamp := CASE WHEN history THEN NEW.occurred_at ELSE clock_timestamp() END;
    month_start := date_trunc('month', stamp, 'UTC');
    -- Under the lock, the chain's last committed row (or this transaction's own) is its end:
    -- a later writer of the chain waits for this transaction to end. Routed to this month, no
    -- later month can hold one of its rows.
    IF history OR NEW.occurred_at >= month_start THEN
        SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
        FROM revoker.%2$I
        WHERE chain_key = NEW.chain_key
        ORDER BY chain_seq DESC
        LIMIT 1;
        found_head := FOUND;
    END IF;
    IF NOT found_head THEN
        SELECT chain_seq, hash, occurred_at INTO head_seq, head_hash, head_at
        FROM revoker.audit_events
        WHERE chain_key = NEW.chain_key
        ORDER BY chain_seq DESC
        LIMIT 1;
        found_head := FOUND;
    END IF;
    IF NOT found_head THEN
        -- A chain whose rows are all archived goes on from its last archived row.
        SELECT archived_seq, archived_hash INTO head_seq, head_hash
        FROM revoker.audit_chains
        WHERE chain_key = NEW.chain_key AND archived_seq IS NOT NULL;
    END IF;
    -- Stamped under the lock, so id and time increase along a chain.
    NEW.id := nextval('revoker.audit_events_id_seq');
    IF history THEN
        IF NEW.occurred_at IS NULL OR NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'a history row must not occur before its chain''s previous row (%%)', head_at USING ERRCODE = '22008';
        END IF;
    ELSIF date_trunc('month', NEW.occurred_at, 'UTC') = month_start THEN
        NEW.occurred_at := stamp;
    ELSIF stamp < month_start + interval '1 minute' AND NEW.occurred_at < month_start
        AND NEW.occurred_at >= month_start - interval '1 minute' THEN
        NEW.occurred_at := month_start - interval '1 microsecond';
        IF NEW.occurred_at < head_at THEN
            RAISE EXCEPTION 'the month turned while this audit row was written; write it again' USING ERRCODE = '40001';
        END IF;
    ELSE
        RAISE EXCEPTION 'an audit row''s time is the database''s to stamp: a given one (%%) is refused', NEW.occurred_at
            USING ERRCODE = '42501';
    END IF;
    NEW.recorded_by := session_user;
    NEW.txid := pg_current_xact_id();
    NEW.chain_seq := coalesce(head_seq, 0) + 1;
    NEW.prev_hash := coalesce(head_hash, '\x0000000000000000000000000000000000000000000000000000000000000000');
    NEW.hash := revoker.audit_row_hash(NEW.prev_hash, NEW);
    RETURN NEW;
END;
$stamp$;
$template$, partition || '_stamp', partition);
    EXECUTE format('REVOKE ALL ON FUNCTION revoker.%I() FROM PUBLIC', partition || '_stamp');
    EXECUTE format(
        'CREATE OR REPLACE TRIGGER audit_events_stamp BEFORE INSERT ON revoker.%I FOR EACH ROW EXECUTE FUNCTION revoker.%I()',
        partition, partition || '_stamp');
END;
$_$;

--
-- Name: check_grant_fields(text, text, text, text, text, text, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.check_grant_fields(client_id text, reference text, reference_name text, user_id text, user_name text, credential text, redirect_uri text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_visible constant text := ' characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space';
BEGIN
    IF client_id IS NULL OR char_length(client_id) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(client_id) THEN
        RAISE EXCEPTION 'client_id must be 1 to 255%', v_visible USING ERRCODE = '22023';
    END IF;
    IF reference IS NULL OR char_length(reference) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(reference) THEN
        RAISE EXCEPTION '% must be 1 to 255%', reference_name, v_visible USING ERRCODE = '22023';
    END IF;
    IF user_id IS NOT NULL AND (char_length(user_id) NOT BETWEEN 1 AND 255 OR NOT revoker.is_visible_text(user_id)) THEN
        RAISE EXCEPTION '% must be 1 to 255%', user_name, v_visible USING ERRCODE = '22023';
    END IF;
    IF credential IS NULL OR octet_length(credential) NOT BETWEEN 1 AND 8192 OR credential !~ '^[!-~]+$' THEN
        RAISE EXCEPTION 'credential must be 8192 bytes at most of printable ASCII without spaces' USING ERRCODE = '22023';
    END IF;
    IF redirect_uri IS NOT NULL
       AND (char_length(redirect_uri) NOT BETWEEN 1 AND 2048
            OR redirect_uri ~ E'[\\u0001-\\u001f\\u007f-\\u009f]'
            OR redirect_uri !~* '^https?://[^/?#[:space:]]+') THEN
        RAISE EXCEPTION 'redirect_uri must be an absolute http(s) URL of at most 2048 characters' USING ERRCODE = '22023';
    END IF;
END;
$_$;

--
-- Name: compact_counts(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.compact_counts() RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH moved AS (DELETE FROM revoker.request_counts RETURNING client_id, state, outcome, n)
    INSERT INTO revoker.request_counts (client_id, state, outcome, n)
    SELECT client_id, state, outcome, sum(n) FROM moved GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
    WITH moved AS (DELETE FROM revoker.grant_counts RETURNING client_id, provider, state, n)
    INSERT INTO revoker.grant_counts (client_id, provider, state, n)
    SELECT client_id, provider, state, sum(n) FROM moved GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
$$;

--
-- Name: complete_deletion(uuid); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.complete_deletion(p_deletion uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_deletion revoker.account_deletions;
    v_count    integer;
    v_outcome  text;
BEGIN
    SELECT * INTO v_deletion FROM revoker.account_deletions WHERE id = p_deletion AND state = 'pending' FOR UPDATE;
    IF NOT FOUND OR NOT v_deletion.fanned_out THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM revoker.grants g WHERE g.deletion_id = p_deletion AND g.state IN ('pending', 'revoking'))
       OR EXISTS (SELECT 1 FROM revoker.revocation_requests r
                  WHERE r.deletion_id = p_deletion AND r.state IN ('pending', 'running')) THEN
        RETURN;
    END IF;
    SELECT (SELECT count(*) FROM revoker.grants g WHERE g.deletion_id = p_deletion)
         + (SELECT count(*) FROM revoker.revocation_requests r WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL)
      INTO v_count;
    v_outcome := CASE
        WHEN v_count = 0 THEN 'nothing_held'
        WHEN EXISTS (SELECT 1 FROM revoker.grants g WHERE g.deletion_id = p_deletion AND g.state = 'held')
          OR EXISTS (SELECT 1 FROM revoker.revocation_requests r
                     WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL AND r.state <> 'succeeded') THEN 'incomplete'
        ELSE 'revoked' END;
    UPDATE revoker.account_deletions SET state = 'completed', outcome = v_outcome, completed_at = now() WHERE id = p_deletion;
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT p_deletion, g.client_id, g.account_reference, g.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || g.id::text || ' state=' || g.state || ' outcome=' || coalesce(g.end_reason, rr.outcome, 'none')
    FROM revoker.grants g LEFT JOIN revoker.revocation_requests rr ON rr.id = g.revoke_request_id
    WHERE g.deletion_id = p_deletion
    ORDER BY g.created_at, g.id;
    INSERT INTO revoker.audit_events (request_id, external_reference, event, attempt, actor, detail)
    VALUES (p_deletion, v_deletion.account_reference, 'deletion_completed', 0, 'revoker',
            'outcome=' || v_outcome || ' covered=' || v_count);
    PERFORM revoker.publish_deletion(p_deletion, 'account.deletion_completed');
END;
$$;

--
-- Name: count_grants(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.count_grants() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: count_requests(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.count_requests() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: current_intake_key(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.current_intake_key(OUT key_id text, OUT public_key bytea) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    SELECT k.key_id, k.public_key INTO key_id, public_key FROM revoker.intake_keys k WHERE k.is_current;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no intake key is published: configure intake_keys_file and start Revoker (or run revoker migrate)'
            USING ERRCODE = '55000';
    END IF;
END;
$$;

--
-- Name: deletion_request_ended(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.deletion_request_ended() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM revoker.complete_deletion(NEW.deletion_id);
    RETURN NULL;
END;
$$;

--
-- Name: deletion_summary(uuid, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.deletion_summary(p_deletion uuid, p_client_id text) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT jsonb_build_object(
        'id', d.id, 'account_reference', d.account_reference, 'state', d.state, 'outcome', d.outcome,
        'requested_at', d.requested_at, 'completed_at', d.completed_at,
        'grants', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'grant_id', g.id, 'provider', g.provider, 'client_id', g.client_id, 'user_id', g.user_id,
                       'state', g.state, 'outcome', coalesce(g.end_reason, rr.outcome), 'request_id', g.revoke_request_id)
                   ORDER BY g.created_at, g.id)
            FROM revoker.grants g LEFT JOIN revoker.revocation_requests rr ON rr.id = g.revoke_request_id
            WHERE g.deletion_id = d.id AND g.client_id = p_client_id), '[]'::jsonb),
        'requests', coalesce((
            SELECT jsonb_agg(jsonb_build_object('request_id', r.id, 'provider', r.provider, 'state', r.state, 'outcome', r.outcome)
                   ORDER BY r.created_at, r.id)
            FROM revoker.revocation_requests r
            WHERE r.deletion_id = d.id AND r.grant_id IS NULL AND r.client_id = p_client_id), '[]'::jsonb))
    FROM revoker.account_deletions d WHERE d.id = p_deletion
$$;

--
-- Name: deletion_trace_shared(uuid); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.deletion_trace_shared(p_deletion uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT d.client_ids IS NOT NULL
        OR (SELECT count(DISTINCT c) FROM (
                SELECT g.client_id AS c FROM revoker.grants g WHERE g.deletion_id = d.id
                UNION ALL SELECT r.client_id FROM revoker.revocation_requests r WHERE r.deletion_id = d.id AND r.grant_id IS NULL) apps) <= 1
    FROM revoker.account_deletions d WHERE d.id = p_deletion
$$;

--
-- Name: enqueue_revocation(text, text, text, text, text, text, integer); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.enqueue_revocation(client_id text, external_reference text, credential_kind text, credential text, apple_user_id text DEFAULT NULL::text, redirect_uri text DEFAULT NULL::text, max_attempts integer DEFAULT NULL::integer) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_id       uuid;
    v_digest   bytea;
    v_existing record;
    v_key      record;
    v_provider text;
BEGIN
    PERFORM revoker.check_grant_fields(enqueue_revocation.client_id, enqueue_revocation.external_reference,
                                       'external_reference', enqueue_revocation.apple_user_id, 'apple_user_id',
                                       enqueue_revocation.credential, enqueue_revocation.redirect_uri);
    IF enqueue_revocation.credential_kind IS NULL
       OR enqueue_revocation.credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code, refresh_token or access_token' USING ERRCODE = '22023';
    END IF;
    IF coalesce(enqueue_revocation.max_attempts, 8) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 100' USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(a.provider, 'apple') INTO v_provider FROM revoker.apps a WHERE a.client_id = enqueue_revocation.client_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'client_id must name an app Revoker is configured for (revoker.apps)' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_key FROM revoker.current_intake_key();
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(enqueue_revocation.credential, 'UTF8'));

    FOR attempt IN 1..10 LOOP
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, redirect_uri, max_attempts)
        VALUES
            (v_provider, enqueue_revocation.client_id, enqueue_revocation.external_reference,
             enqueue_revocation.apple_user_id, enqueue_revocation.credential_kind,
             enqueue_revocation.credential_kind, v_digest, enqueue_revocation.redirect_uri,
             coalesce(enqueue_revocation.max_attempts, 8))
        ON CONFLICT (client_id, external_reference) WHERE state IN ('pending', 'running') AND grant_id IS NULL
            DO NOTHING
        RETURNING r.id INTO v_id;

        IF v_id IS NOT NULL THEN
            INSERT INTO revoker.credential_intake (request_id, key_id, sealed)
            VALUES (v_id, v_key.key_id, revoker.seal_for_intake(enqueue_revocation.credential, v_key.public_key));
            INSERT INTO revoker.audit_events
                (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
            VALUES
                (v_id, enqueue_revocation.client_id, enqueue_revocation.external_reference,
                 enqueue_revocation.apple_user_id, 'enqueued', 0,
                 'sql:' || left(session_user::text, 190),
                 'provider=' || v_provider || ' kind=' || enqueue_revocation.credential_kind);
            RETURN v_id;
        END IF;

        SELECT r.id, r.enqueued_kind, r.credential_digest
          INTO v_existing
          FROM revoker.revocation_requests r
         WHERE r.client_id = enqueue_revocation.client_id
           AND r.external_reference = enqueue_revocation.external_reference
           AND r.state IN ('pending', 'running') AND r.grant_id IS NULL;
        IF FOUND THEN
            IF v_existing.enqueued_kind <> enqueue_revocation.credential_kind
               OR v_existing.credential_digest <> v_digest THEN
                RAISE EXCEPTION 'a live revocation request for this external reference has a different credential'
                    USING ERRCODE = 'RV409';
            END IF;
            RETURN v_existing.id;
        END IF;
        -- The conflicting request finished between the INSERT and the SELECT: try again.
    END LOOP;
    RAISE EXCEPTION 'could not enqueue: the live request kept changing' USING ERRCODE = '40001';
END;
$$;

--
-- Name: erasure_opened(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.erasure_opened() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.erasure_requests (code, provider, client_id, user_id, received_at, grants_ended)
    SELECT NEW.erasure_code, NEW.provider, NEW.client_id, NEW.user_id, NEW.received_at,
           (SELECT count(*)::int FROM revoker.grants g
             WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id
               AND ((g.state = 'dead' AND g.end_reason = NEW.type AND g.ended_at = now()) OR g.state = 'revoking'));
    RETURN NULL;
END;
$$;

--
-- Name: fan_out_deletion(uuid, integer, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.fan_out_deletion(p_deletion uuid, p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_count integer;
BEGIN
    PERFORM 1 FROM revoker.account_deletions d WHERE d.id = p_deletion AND d.state = 'pending' AND NOT d.fanned_out FOR UPDATE;
    IF NOT FOUND OR p_limit < 1 THEN
        RETURN 0;
    END IF;
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT p_deletion, q.client_id, q.account_reference, q.user_id, 'deletion_grant', 0, p_actor,
           'grant=' || q.grant_id::text || ' provider=' || q.provider || ' request=' || q.request_id::text
    FROM revoker.request_grant_revocations(
        ARRAY(SELECT g.id FROM revoker.grants g
              WHERE g.deletion_id = p_deletion AND g.state = 'held'
                AND NOT EXISTS (SELECT 1 FROM revoker.revocation_requests r
                                WHERE r.id = g.revoke_request_id AND r.deletion_id = p_deletion)
              ORDER BY g.created_at, g.id
              LIMIT p_limit
              FOR UPDATE),
        p_deletion, p_actor, 'deletion=' || p_deletion::text) AS q
    ORDER BY q.grant_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count < p_limit THEN
        UPDATE revoker.account_deletions SET fanned_out = true WHERE id = p_deletion;
    END IF;
    RETURN v_count;
END;
$$;

--
-- Name: fan_out_deletions(integer, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.fan_out_deletions(p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_deletion uuid;
    v_made     integer;
    v_total    integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'the limit must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    FOR v_deletion IN
        SELECT d.id FROM revoker.account_deletions d
        WHERE d.state = 'pending' AND NOT d.fanned_out
        ORDER BY d.requested_at, d.id
        LIMIT 10
        FOR UPDATE SKIP LOCKED
    LOOP
        v_made := revoker.fan_out_deletion(v_deletion, p_limit - v_total, p_actor);
        IF v_made < p_limit - v_total THEN
            -- Its last batch: it may be complete already (every request ended meanwhile).
            PERFORM revoker.complete_deletion(v_deletion);
        END IF;
        v_total := v_total + v_made;
        EXIT WHEN v_total >= p_limit;
    END LOOP;
    RETURN v_total;
END;
$$;

--
-- Name: grants_deletion_moved(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_deletion_moved() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF OLD.state = 'pending' AND NEW.state = 'held'
       AND EXISTS (SELECT 1 FROM revoker.account_deletions d WHERE d.id = NEW.deletion_id AND d.state = 'pending') THEN
        PERFORM revoker.request_grant_revocation(NEW, 'revoker');
        RETURN NULL;
    END IF;
    PERFORM revoker.complete_deletion(NEW.deletion_id);
    RETURN NULL;
END;
$$;

--
-- Name: grants_hold_ended(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_hold_ended() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    UPDATE revoker.grants g
    SET state = 'failed', end_reason = NEW.outcome, ended_at = now(), updated_at = now()
    WHERE g.id = NEW.grant_id AND g.state = 'pending';
    RETURN NULL;
END;
$$;

--
-- Name: grants_join_live_deletion(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_join_live_deletion() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(revoker.account_lock_key(NEW.account_reference));
    IF NEW.deletion_id IS NULL THEN
        SELECT d.id INTO NEW.deletion_id FROM revoker.account_deletions d
        WHERE d.account_reference = NEW.account_reference AND d.state = 'pending'
          AND (d.client_ids IS NULL OR NEW.client_id = ANY (d.client_ids))
        ORDER BY d.requested_at, d.id
        LIMIT 1;
    END IF;
    RETURN NEW;
END;
$$;

--
-- Name: grants_revoke_ended(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_revoke_ended() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_state text := CASE WHEN NEW.outcome = 'revoked' THEN 'revoked'
                         WHEN NEW.outcome IN ('already_invalid', 'revoked_by_user') THEN 'dead'
                         ELSE 'held' END;
BEGIN
    UPDATE revoker.grants g
    SET state = v_state, updated_at = now(),
        end_reason = CASE WHEN v_state <> 'held' THEN NEW.outcome END,
        ended_at = CASE WHEN v_state <> 'held' THEN now() END,
        sealed_token = CASE WHEN v_state = 'held' THEN g.sealed_token END,
        token_key_id = CASE WHEN v_state = 'held' THEN g.token_key_id END
    WHERE g.id = NEW.grant_id AND g.state = 'revoking';
    RETURN NULL;
END;
$$;

--
-- Name: grants_told_gone(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_told_gone() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    WITH ended AS (
        UPDATE revoker.grants g
        SET state = 'dead', end_reason = NEW.type, sealed_token = NULL, token_key_id = NULL, ended_at = now(), updated_at = now()
        WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id AND g.state = 'held'
          AND g.user_source = 'verified_id_token'
        RETURNING g.id, g.hold_request_id, g.client_id, g.account_reference, g.user_id
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT e.hold_request_id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
           'grant=' || e.id::text || ' state=dead outcome=' || NEW.type || ' (the provider says so; token erased)'
    FROM ended e ORDER BY e.id;

    PERFORM revoker.request_grant_revocations(
        ARRAY(SELECT g.id FROM revoker.grants g
              WHERE g.provider = NEW.provider AND g.client_id = NEW.client_id AND g.user_id = NEW.user_id AND g.state = 'held'
                AND g.user_source IS DISTINCT FROM 'verified_id_token'
              ORDER BY g.id FOR UPDATE),
        NULL, 'revoker',
        NEW.type || ' names the user this grant was registered under, never proven its owner: revoked, not erased');
    RETURN NULL;
END;
$$;

--
-- Name: grants_validation_ended(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_validation_ended() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NEW.outcome IN ('already_invalid', 'revoked_by_user') THEN
        WITH ended AS (
            UPDATE revoker.grants g
            SET state = 'dead', end_reason = NEW.outcome, sealed_token = NULL, token_key_id = NULL,
                ended_at = now(), updated_at = now(), validated_at = now()
            WHERE g.id = NEW.grant_id AND g.state = 'held'
            RETURNING g.id, g.client_id, g.account_reference, g.user_id
        )
        INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT NEW.id, e.client_id, e.account_reference, e.user_id, 'grant_ended', 0, 'revoker',
               'grant=' || e.id::text || ' state=dead outcome=' || NEW.outcome || ' (found invalid when validated; token erased)'
        FROM ended e;
    ELSE
        UPDATE revoker.grants g SET validated_at = now(), updated_at = now()
        WHERE g.id = NEW.grant_id AND g.state = 'held';
    END IF;
    RETURN NULL;
END;
$$;

--
-- Name: grants_validation_moot(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.grants_validation_moot() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    WITH cancelled AS (
        UPDATE revoker.revocation_requests r
        SET state = 'cancelled', outcome = 'cancelled', finished_at = now(), updated_at = now()
        WHERE r.grant_id = NEW.id AND r.purpose = 'validate' AND r.state = 'pending'
        RETURNING r.id, r.client_id, r.external_reference, r.apple_user_id, r.attempts
    )
    INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    SELECT c.id, c.client_id, c.external_reference, c.apple_user_id, 'cancelled', c.attempts, 'revoker',
           'outcome=cancelled the grant is ' || NEW.state || ' now: nothing to validate'
    FROM cancelled c;
    RETURN NULL;
END;
$$;

--
-- Name: is_trace_parent(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.is_trace_parent(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
    SELECT p_value ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       AND substr(p_value, 4, 32) <> repeat('0', 32) AND substr(p_value, 37, 16) <> repeat('0', 16)
$_$;

--
-- Name: is_visible_text(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.is_visible_text(value text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    -- NewRevocation.refusedCharacters and NewRevocation.edgeWhiteSpace.
    v_refused  constant text := E'[\\u0001-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\ufeff\\ufff9-\\ufffb\\ue000-\\uf8ff]';
    v_edge     constant text := E'[\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]';
BEGIN
    RETURN value !~ v_refused AND value !~ ('^' || v_edge) AND value !~ (v_edge || '$');
END;
$_$;

--
-- Name: notify_outbox_events(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.notify_outbox_events() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_notify('revoker_events', '');
    RETURN NULL;
END;
$$;

--
-- Name: notify_revocation_requests(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.notify_revocation_requests() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM pg_notify('revoker_requests', '');
    RETURN NULL;
END;
$$;

--
-- Name: outbox_audit_checkpoint(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.outbox_audit_checkpoint() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, checkpoint)
    SELECT 'audit.checkpoint', a.client_id, revoker.audit_checkpoint_record(NEW)
    FROM revoker.apps a ORDER BY a.client_id;
    RETURN NULL;
END;
$$;

--
-- Name: outbox_checkpoint_refused(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.outbox_checkpoint_refused() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, error_code)
    SELECT 'audit.checkpoint_refused', a.client_id, left(split_part(coalesce(NEW.detail, ''), ' ', 1), 100)
    FROM revoker.apps a ORDER BY a.client_id;
    RETURN NULL;
END;
$$;

--
-- Name: outbox_provider_message(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.outbox_provider_message() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO revoker.outbox_events (type, client_id, apple_user_id, notification_id, event_time, provider, erasure_code)
    VALUES (NEW.event_type, NEW.client_id, NEW.user_id, NEW.message_id, coalesce(NEW.event_time, NEW.issued_at), NEW.provider,
            NEW.erasure_code);
    RETURN NULL;
END;
$$;

--
-- Name: outbox_revocation_final(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.outbox_revocation_final() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF NEW.purpose = 'validate' THEN
        RETURN NULL;
    END IF;
    INSERT INTO revoker.outbox_events
        (type, client_id, request_id, external_reference, apple_user_id, outcome, error_code, provider, grant_id)
    VALUES
        (CASE WHEN NEW.purpose = 'hold' THEN CASE WHEN NEW.outcome = 'held' THEN 'grant.held' ELSE 'grant.failed' END
              ELSE 'revocation.' || NEW.state END,
         NEW.client_id, NEW.id, NEW.external_reference, NEW.apple_user_id,
         NEW.outcome, CASE WHEN NEW.state = 'failed' THEN NEW.last_error_code END, NEW.provider, NEW.grant_id);
    RETURN NULL;
END;
$$;

--
-- Name: prune_events(timestamp with time zone, text[]); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.prune_events(occurred_before timestamp with time zone, endpoints text[]) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    horizon_txid xid8;
    horizon_position bigint;
    pruned bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM revoker.webhook_deliveries d
               WHERE d.endpoint = ANY(endpoints) AND d.cursor_txid IS NULL) THEN
        RETURN 0;
    END IF;
    SELECT d.cursor_txid, d.cursor_position INTO horizon_txid, horizon_position
    FROM revoker.webhook_deliveries d
    WHERE d.endpoint = ANY(endpoints)
    ORDER BY d.cursor_txid, d.cursor_position
    LIMIT 1;
    PERFORM set_config('revoker.pruning_events', 'on', true);
    DELETE FROM revoker.outbox_events e
    WHERE e.occurred_at < occurred_before
      AND (horizon_txid IS NULL OR (e.txid, e.position) <= (horizon_txid, horizon_position));
    GET DIAGNOSTICS pruned = ROW_COUNT;
    PERFORM set_config('revoker.pruning_events', 'off', true);
    RETURN pruned;
END;
$$;

--
-- Name: publish_deletion(uuid, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.publish_deletion(p_deletion uuid, p_type text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_deletion revoker.account_deletions;
    v_apps     text[];
BEGIN
    SELECT * INTO v_deletion FROM revoker.account_deletions WHERE id = p_deletion;
    SELECT array_agg(DISTINCT c) INTO v_apps FROM (
        SELECT g.client_id AS c FROM revoker.grants g WHERE g.deletion_id = p_deletion
        UNION SELECT r.client_id FROM revoker.revocation_requests r WHERE r.deletion_id = p_deletion AND r.grant_id IS NULL) apps;
    v_apps := coalesce(v_apps, v_deletion.client_ids);
    INSERT INTO revoker.outbox_events (type, client_id, external_reference, outcome, deletion)
    SELECT p_type, app, v_deletion.account_reference, v_deletion.outcome, revoker.deletion_summary(p_deletion, app)
    FROM unnest(v_apps) AS app;
END;
$$;

--
-- Name: refuse_change(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'outbox_events'
       AND current_setting('revoker.pruning_events', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'revoker.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'RV403';
END;
$$;

--
-- Name: register_grant(text, text, text, text, text, text, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.register_grant(provider text, client_id text, account_reference text, credential_kind text, credential text, redirect_uri text DEFAULT NULL::text, user_id text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_grant    uuid;
    v_request  uuid;
    v_digest   bytea;
    v_existing record;
    v_key      record;
BEGIN
    PERFORM revoker.check_grant_fields(register_grant.client_id, register_grant.account_reference,
                                       'account_reference', register_grant.user_id, 'user_id',
                                       register_grant.credential, register_grant.redirect_uri);
    IF register_grant.credential_kind IS NULL
       OR register_grant.credential_kind NOT IN ('authorization_code', 'refresh_token', 'access_token') THEN
        RAISE EXCEPTION 'credential_kind must be authorization_code, refresh_token or access_token' USING ERRCODE = '22023';
    END IF;
    IF register_grant.redirect_uri IS NOT NULL AND register_grant.credential_kind <> 'authorization_code' THEN
        RAISE EXCEPTION 'redirect_uri belongs to an authorization code only' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM revoker.apps a
                   WHERE a.client_id = register_grant.client_id AND coalesce(a.provider, 'apple') = register_grant.provider) THEN
        RAISE EXCEPTION 'provider and client_id must name an app Revoker is configured for (revoker.apps)' USING ERRCODE = '22023';
    END IF;
    SELECT * INTO v_key FROM revoker.current_intake_key();
    v_digest := pg_catalog.sha256(pg_catalog.convert_to(register_grant.credential, 'UTF8'));

    INSERT INTO revoker.grants AS g
        (provider, client_id, account_reference, user_id, user_source, registered_kind, registered_digest)
    VALUES
        (register_grant.provider, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         CASE WHEN register_grant.user_id IS NOT NULL THEN 'stated' END, register_grant.credential_kind, v_digest)
    ON CONFLICT ON CONSTRAINT grants_registered_once DO NOTHING
    RETURNING g.id INTO v_grant;

    IF v_grant IS NULL THEN
        SELECT g.id, g.account_reference, g.provider INTO v_existing
          FROM revoker.grants g
         WHERE g.client_id = register_grant.client_id AND g.registered_digest = v_digest;
        IF v_existing.account_reference <> register_grant.account_reference OR v_existing.provider <> register_grant.provider THEN
            RAISE EXCEPTION 'this code or token is registered for another account' USING ERRCODE = 'RV409';
        END IF;
        RETURN v_existing.id;
    END IF;

    INSERT INTO revoker.revocation_requests AS r
        (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
         credential_digest, redirect_uri, purpose, grant_id)
    VALUES
        (register_grant.provider, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         register_grant.credential_kind, register_grant.credential_kind, v_digest, register_grant.redirect_uri,
         'hold', v_grant)
    RETURNING r.id INTO v_request;
    UPDATE revoker.grants SET hold_request_id = v_request WHERE id = v_grant;
    INSERT INTO revoker.credential_intake (request_id, key_id, sealed)
    VALUES (v_request, v_key.key_id, revoker.seal_for_intake(register_grant.credential, v_key.public_key));
    INSERT INTO revoker.audit_events
        (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    VALUES
        (v_request, register_grant.client_id, register_grant.account_reference, register_grant.user_id,
         'grant_registered', 0, 'sql:' || left(session_user::text, 190),
         'grant=' || v_grant::text || ' provider=' || register_grant.provider || ' kind=' || register_grant.credential_kind
         || CASE WHEN register_grant.user_id IS NOT NULL THEN ' user=stated' ELSE '' END);
    RETURN v_grant;
END;
$$;

--
-- Name: request_account_deletion(text, text[]); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.request_account_deletion(account_reference text, client_ids text[] DEFAULT NULL::text[]) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_started record;
BEGIN
    SELECT * INTO v_started
    FROM revoker.start_account_deletion(request_account_deletion.account_reference, request_account_deletion.client_ids,
                                        'sql:' || left(session_user::text, 190));
    PERFORM revoker.complete_deletion(v_started.deletion_id);
    RETURN v_started.deletion_id;
END;
$$;

--
-- Name: grants; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.grants (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    provider text NOT NULL,
    client_id text NOT NULL,
    account_reference text NOT NULL,
    user_id text,
    user_source text,
    registered_kind text NOT NULL,
    registered_digest bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    end_reason text,
    sealed_token bytea,
    token_key_id text,
    hold_request_id uuid,
    revoke_request_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    held_at timestamp with time zone,
    ended_at timestamp with time zone,
    deletion_id uuid,
    validated_at timestamp with time zone,
    trace_parent text,
    token_kind text DEFAULT 'refresh_token'::text NOT NULL,
    CONSTRAINT grants_account_reference_check CHECK (((char_length(account_reference) >= 1) AND (char_length(account_reference) <= 255))),
    CONSTRAINT grants_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT grants_end_reason_check CHECK (((char_length(end_reason) >= 1) AND (char_length(end_reason) <= 100))),
    CONSTRAINT grants_ended_erased CHECK ((((state = ANY (ARRAY['pending'::text, 'held'::text, 'revoking'::text])) AND (ended_at IS NULL) AND (end_reason IS NULL)) OR ((state = ANY (ARRAY['revoked'::text, 'dead'::text, 'failed'::text])) AND (sealed_token IS NULL) AND (ended_at IS NOT NULL) AND (end_reason IS NOT NULL)))),
    CONSTRAINT grants_held_holds CHECK (((state <> ALL (ARRAY['held'::text, 'revoking'::text])) OR ((sealed_token IS NOT NULL) AND (held_at IS NOT NULL)))),
    CONSTRAINT grants_provider_check CHECK ((provider ~ '^[a-z][a-z0-9_]{0,31}$'::text)),
    CONSTRAINT grants_registered_digest_check CHECK ((octet_length(registered_digest) = 32)),
    CONSTRAINT grants_registered_kind_check CHECK ((registered_kind = ANY (ARRAY['authorization_code'::text, 'refresh_token'::text, 'access_token'::text, 'identity_token'::text]))),
    CONSTRAINT grants_sealed_with_key CHECK (((sealed_token IS NULL) = (token_key_id IS NULL))),
    CONSTRAINT grants_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'held'::text, 'revoking'::text, 'revoked'::text, 'dead'::text, 'failed'::text]))),
    CONSTRAINT grants_token_kind_check CHECK ((token_kind = ANY (ARRAY['refresh_token'::text, 'access_token'::text, 'identity_token'::text]))),
    CONSTRAINT grants_trace_parent_check CHECK (revoker.is_trace_parent(trace_parent)),
    CONSTRAINT grants_user_id_check CHECK (((char_length(user_id) >= 1) AND (char_length(user_id) <= 255))),
    CONSTRAINT grants_user_source CHECK (((user_id IS NULL) = (user_source IS NULL))),
    CONSTRAINT grants_user_source_check CHECK ((user_source = ANY (ARRAY['verified_id_token'::text, 'stated'::text])))
);

--
-- Name: request_grant_revocation(revoker.grants, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.request_grant_revocation(p_grant revoker.grants, p_actor text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_request uuid;
BEGIN
    INSERT INTO revoker.revocation_requests AS r
        (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
         credential_digest, purpose, grant_id, deletion_id)
    VALUES
        (p_grant.provider, p_grant.client_id, p_grant.account_reference, p_grant.user_id, p_grant.token_kind, p_grant.token_kind,
         p_grant.registered_digest, 'revoke', p_grant.id, p_grant.deletion_id)
    RETURNING r.id INTO v_request;
    UPDATE revoker.grants SET state = 'revoking', revoke_request_id = v_request, updated_at = now()
    WHERE id = p_grant.id;
    INSERT INTO revoker.audit_events
        (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
    VALUES
        (v_request, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'enqueued', 0, p_actor,
         'provider=' || p_grant.provider || ' kind=' || p_grant.token_kind || ' grant=' || p_grant.id::text
         || ' deletion=' || p_grant.deletion_id::text),
        (p_grant.deletion_id, p_grant.client_id, p_grant.account_reference, p_grant.user_id, 'deletion_grant', 0, p_actor,
         'grant=' || p_grant.id::text || ' provider=' || p_grant.provider || ' request=' || v_request::text);
    RETURN v_request;
END;
$$;

--
-- Name: request_grant_revocations(uuid[], uuid, text, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.request_grant_revocations(p_grants uuid[], p_deletion uuid, p_actor text, p_why text) RETURNS TABLE(request_id uuid, grant_id uuid, provider text, client_id text, account_reference text, user_id text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    WITH requested AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id, deletion_id)
        SELECT g.provider, g.client_id, g.account_reference, g.user_id, g.token_kind, g.token_kind,
               g.registered_digest, 'revoke', g.id, p_deletion
        FROM revoker.grants g
        WHERE g.id = ANY (p_grants) AND g.state = 'held'
        ORDER BY g.created_at, g.id
        RETURNING r.id, r.grant_id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.credential_kind
    ), moved AS (
        UPDATE revoker.grants g
        SET state = 'revoking', revoke_request_id = q.id, updated_at = now()
        FROM requested q
        WHERE g.id = q.grant_id
    ), audit AS (
        INSERT INTO revoker.audit_events (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT q.id, q.client_id, q.external_reference, q.apple_user_id, 'enqueued', 0, p_actor,
               'provider=' || q.provider || ' kind=' || q.credential_kind || ' grant=' || q.grant_id::text || ' ' || p_why
        FROM requested q ORDER BY q.grant_id
    )
    SELECT q.id, q.grant_id, q.provider, q.client_id, q.external_reference, q.apple_user_id FROM requested q
$$;

--
-- Name: request_trace_parent(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.request_trace_parent() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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

--
-- Name: schedule_grant_validations(interval, integer, text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.schedule_grant_validations(p_every interval, p_limit integer, p_actor text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_every IS NULL OR p_every < interval '1 day' THEN
        RAISE EXCEPTION 'a held grant is validated at most once a day, as Apple asks: the interval must be at least 1 day'
            USING ERRCODE = '22023';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'the limit must be between 1 and 10000' USING ERRCODE = '22023';
    END IF;
    WITH due AS (
        SELECT g.id, g.provider, g.client_id, g.account_reference, g.user_id, g.registered_digest
        FROM revoker.grants g
        WHERE g.state = 'held' AND g.token_kind = 'refresh_token' AND coalesce(g.validated_at, g.held_at) <= now() - p_every
          AND g.client_id <> ALL (ARRAY(SELECT p.client_id FROM revoker.app_pauses p))
          AND NOT EXISTS (SELECT 1 FROM revoker.revocation_requests r
                          WHERE r.grant_id = g.id AND r.purpose = 'validate' AND r.state IN ('pending', 'running'))
        ORDER BY coalesce(g.validated_at, g.held_at), g.id
        LIMIT p_limit
        FOR UPDATE OF g SKIP LOCKED
    ), scheduled AS (
        INSERT INTO revoker.revocation_requests AS r
            (provider, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind,
             credential_digest, purpose, grant_id)
        SELECT d.provider, d.client_id, d.account_reference, d.user_id, 'refresh_token', 'refresh_token',
               d.registered_digest, 'validate', d.id
        FROM due d
        ON CONFLICT DO NOTHING
        RETURNING r.id, r.provider, r.client_id, r.external_reference, r.apple_user_id, r.grant_id
    ), audit AS (
        INSERT INTO revoker.audit_events
            (request_id, client_id, external_reference, apple_user_id, event, attempt, actor, detail)
        SELECT s.id, s.client_id, s.external_reference, s.apple_user_id, 'enqueued', 0, p_actor,
               'provider=' || s.provider || ' kind=refresh_token grant=' || s.grant_id::text || ' purpose=validate'
        FROM scheduled s
        ORDER BY s.id
    )
    SELECT count(*) INTO v_count FROM scheduled;
    RETURN v_count;
END;
$$;

--
-- Name: seal_for_intake(text, bytea); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.seal_for_intake(credential text, public_key bytea) RETURNS bytea
    LANGUAGE sql STRICT
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
            SELECT revoker.pgp_pub_encrypt_bytea(pg_catalog.convert_to(credential, 'UTF8'), public_key,
                                            'cipher-algo=aes256, compress-algo=0')
        $$;

--
-- Name: session_trace_parent(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.session_trace_parent() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT v FROM (SELECT current_setting('revoker.trace_parent', true) AS v) s WHERE revoker.is_trace_parent(v)
$$;

--
-- Name: session_trace_parent_default(); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.session_trace_parent_default() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    NEW.trace_parent := coalesce(NEW.trace_parent, revoker.session_trace_parent());
    RETURN NEW;
END;
$$;

--
-- Name: start_account_deletion(text, text[], text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.start_account_deletion(p_account_reference text, p_client_ids text[], p_actor text, OUT deletion_id uuid, OUT created boolean) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_scope text[];
BEGIN
    IF p_account_reference IS NULL OR char_length(p_account_reference) NOT BETWEEN 1 AND 255
       OR NOT revoker.is_visible_text(p_account_reference) THEN
        RAISE EXCEPTION 'account_reference must be 1 to 255 characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space'
            USING ERRCODE = '22023';
    END IF;
    IF p_client_ids IS NOT NULL THEN
        IF cardinality(p_client_ids) NOT BETWEEN 1 AND 100
           OR EXISTS (SELECT 1 FROM unnest(p_client_ids) c WHERE c IS NULL OR char_length(c) NOT BETWEEN 1 AND 255) THEN
            RAISE EXCEPTION 'client_ids must list 1 to 100 client_ids of 1 to 255 characters' USING ERRCODE = '22023';
        END IF;
        v_scope := ARRAY(SELECT DISTINCT c FROM unnest(p_client_ids) c ORDER BY c);
    END IF;
    PERFORM pg_advisory_xact_lock(revoker.account_lock_key(p_account_reference));

    SELECT d.id INTO deletion_id FROM revoker.account_deletions d
    WHERE d.account_reference = p_account_reference AND d.state = 'pending'
      AND (d.client_ids IS NULL OR (v_scope IS NOT NULL AND d.client_ids @> v_scope))
    ORDER BY d.client_ids IS NOT DISTINCT FROM v_scope DESC, d.requested_at, d.id
    LIMIT 1;
    IF FOUND THEN
        created := false;
        RETURN;
    END IF;

    INSERT INTO revoker.account_deletions AS d (account_reference, client_ids, requested_by, fanned_out)
    VALUES (p_account_reference, v_scope, p_actor, false)
    RETURNING d.id INTO deletion_id;
    created := true;

    -- Every live grant it covers that no live deletion covers; one in the hands of an earlier
    -- deletion that ended with it still held is taken again.
    UPDATE revoker.grants g SET deletion_id = start_account_deletion.deletion_id, updated_at = now()
    WHERE g.account_reference = p_account_reference AND g.state IN ('pending', 'held')
      AND (v_scope IS NULL OR g.client_id = ANY (v_scope))
      AND NOT EXISTS (SELECT 1 FROM revoker.account_deletions o WHERE o.id = g.deletion_id AND o.state = 'pending');
    INSERT INTO revoker.audit_events (request_id, external_reference, event, attempt, actor, detail)
    VALUES (deletion_id, p_account_reference, 'deletion_requested', 0, p_actor,
            'apps=' || coalesce(left(array_to_string(v_scope, ','), 400), 'all')
            || ' grants=' || (SELECT count(*) FROM revoker.grants g WHERE g.deletion_id = start_account_deletion.deletion_id));
    PERFORM revoker.fan_out_deletion(deletion_id, 200, p_actor);
    PERFORM revoker.publish_deletion(deletion_id, 'account.deletion_requested');
END;
$$;

--
-- Name: worker_lock(text); Type: FUNCTION; Schema: revoker; Owner: -
--

CREATE FUNCTION revoker.worker_lock(owner text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT hashtext('revoker.worker:' || owner) $$;

--
-- Name: account_deletions; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.account_deletions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    account_reference text NOT NULL,
    client_ids text[],
    state text DEFAULT 'pending'::text NOT NULL,
    outcome text,
    requested_by text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    trace_parent text,
    fanned_out boolean DEFAULT true NOT NULL,
    CONSTRAINT account_deletions_account_reference_check CHECK (((char_length(account_reference) >= 1) AND (char_length(account_reference) <= 255))),
    CONSTRAINT account_deletions_client_ids_check CHECK (((client_ids IS NULL) OR ((cardinality(client_ids) >= 1) AND (cardinality(client_ids) <= 100)))),
    CONSTRAINT account_deletions_outcome CHECK (((state = 'completed'::text) = ((outcome IS NOT NULL) AND (completed_at IS NOT NULL)))),
    CONSTRAINT account_deletions_outcome_check CHECK ((outcome = ANY (ARRAY['revoked'::text, 'nothing_held'::text, 'incomplete'::text]))),
    CONSTRAINT account_deletions_requested_by_check CHECK (((char_length(requested_by) >= 1) AND (char_length(requested_by) <= 200))),
    CONSTRAINT account_deletions_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'completed'::text]))),
    CONSTRAINT account_deletions_trace_parent_check CHECK (revoker.is_trace_parent(trace_parent))
);

--
-- Name: app_pauses; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.app_pauses (
    client_id text NOT NULL,
    reason_code text NOT NULL,
    reason_description text,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    next_probe_at timestamp with time zone NOT NULL,
    CONSTRAINT app_pauses_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT app_pauses_reason_code_check CHECK (((char_length(reason_code) >= 1) AND (char_length(reason_code) <= 100))),
    CONSTRAINT app_pauses_reason_description_check CHECK ((char_length(reason_description) <= 500))
);

--
-- Name: provider_messages; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.provider_messages (
    id bigint NOT NULL,
    provider text NOT NULL,
    message_id text NOT NULL,
    client_id text NOT NULL,
    type text NOT NULL,
    user_id text,
    ends_grants boolean NOT NULL,
    ends_account boolean DEFAULT false NOT NULL,
    event_type text,
    issued_at timestamp with time zone NOT NULL,
    event_time timestamp with time zone,
    issuer text NOT NULL,
    key_id text NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    erasure_code text,
    CONSTRAINT provider_messages_check CHECK ((ends_grants OR (NOT ends_account))),
    CONSTRAINT provider_messages_check1 CHECK (((event_type ~ '^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,63}$'::text) AND starts_with(event_type, (provider || '.'::text)))),
    CONSTRAINT provider_messages_check2 CHECK (((user_id IS NOT NULL) OR (NOT ends_grants))),
    CONSTRAINT provider_messages_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT provider_messages_details_check CHECK ((jsonb_typeof(details) = 'object'::text)),
    CONSTRAINT provider_messages_erasure_code_check CHECK ((erasure_code ~ '^[A-Z2-7]{20}$'::text)),
    CONSTRAINT provider_messages_erasure_user CHECK (((erasure_code IS NULL) OR (user_id IS NOT NULL))),
    CONSTRAINT provider_messages_issuer_check CHECK (((char_length(issuer) >= 1) AND (char_length(issuer) <= 255))),
    CONSTRAINT provider_messages_key_id_check CHECK (((char_length(key_id) >= 1) AND (char_length(key_id) <= 255))),
    CONSTRAINT provider_messages_message_id_check CHECK (((char_length(message_id) >= 1) AND (char_length(message_id) <= 255))),
    CONSTRAINT provider_messages_provider_check CHECK ((provider ~ '^[a-z][a-z0-9_]{0,31}$'::text)),
    CONSTRAINT provider_messages_type_check CHECK ((type ~ '^[a-z][a-z0-9-]{0,63}$'::text)),
    CONSTRAINT provider_messages_user_id_check CHECK (((char_length(user_id) >= 1) AND (char_length(user_id) <= 255)))
);

--
-- Name: apple_notifications; Type: VIEW; Schema: revoker; Owner: -
--

CREATE VIEW revoker.apple_notifications AS
 SELECT m.id,
    m.message_id AS jti,
    m.client_id,
    m.type,
    (m.details ->> 'type_as_sent'::text) AS type_as_sent,
    m.user_id AS apple_user_id,
    m.event_time,
    m.issued_at,
    ((m.details ->> 'expires_at'::text))::timestamp with time zone AS expires_at,
    m.issuer,
    m.key_id,
    ((m.details ->> 'had_email'::text))::boolean AS had_email,
    ((m.details ->> 'is_private_email'::text))::boolean AS is_private_email,
    m.received_at
   FROM revoker.provider_messages m
  WHERE (m.provider = 'apple'::text);

--
-- Name: apps; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.apps (
    client_id text NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    provider text,
    CONSTRAINT apps_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT apps_provider_check CHECK ((provider ~ '^[a-z][a-z0-9_]{0,31}$'::text))
);

--
-- Name: audit_archived_checkpoints; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_archived_checkpoints (
    seq bigint NOT NULL,
    archive_id bigint NOT NULL,
    archived_rows bigint NOT NULL,
    leaves bytea,
    CONSTRAINT audit_archived_checkpoints_archived_rows_check CHECK ((archived_rows >= 1)),
    CONSTRAINT audit_archived_checkpoints_leaves_check CHECK (((octet_length(leaves) % 40) = 0))
);

--
-- Name: audit_archived_requests; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_archived_requests (
    request_id uuid NOT NULL,
    archive_id bigint NOT NULL,
    enqueued_id bigint NOT NULL,
    requested_at timestamp with time zone NOT NULL,
    requested_by text NOT NULL,
    client_id text,
    external_reference text,
    user_id text,
    user_ids text[] DEFAULT '{}'::text[] NOT NULL,
    outcome text,
    finished_at timestamp with time zone
);

--
-- Name: audit_archives; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_archives (
    id bigint NOT NULL,
    before timestamp with time zone NOT NULL,
    months text[] NOT NULL,
    file_name text NOT NULL,
    file_sha256 bytea NOT NULL,
    row_count bigint NOT NULL,
    first_id bigint,
    last_id bigint,
    archived_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    archived_by text DEFAULT SESSION_USER NOT NULL,
    first_checkpoint bigint,
    last_checkpoint bigint,
    CONSTRAINT audit_archives_file_name_check CHECK (((char_length(file_name) >= 1) AND (char_length(file_name) <= 1000))),
    CONSTRAINT audit_archives_file_sha256_check CHECK ((octet_length(file_sha256) = 32)),
    CONSTRAINT audit_archives_row_count_check CHECK ((row_count >= 0))
);

--
-- Name: audit_archives_id_seq; Type: SEQUENCE; Schema: revoker; Owner: -
--

ALTER TABLE revoker.audit_archives ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME revoker.audit_archives_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: audit_chains; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_chains (
    chain_key text NOT NULL,
    last_seq bigint NOT NULL,
    last_hash bytea NOT NULL,
    archived_seq bigint,
    archived_hash bytea,
    CONSTRAINT audit_chains_archived_hash_check CHECK ((octet_length(archived_hash) = 32)),
    CONSTRAINT audit_chains_archived_seq_check CHECK ((archived_seq >= 1)),
    CONSTRAINT audit_chains_last_hash_check CHECK ((octet_length(last_hash) = 32)),
    CONSTRAINT audit_chains_last_seq_check CHECK ((last_seq >= 1))
)
WITH (fillfactor='80');

--
-- Name: audit_events_id_seq; Type: SEQUENCE; Schema: revoker; Owner: -
--

CREATE SEQUENCE revoker.audit_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: audit_events_id_seq; Type: SEQUENCE OWNED BY; Schema: revoker; Owner: -
--

ALTER SEQUENCE revoker.audit_events_id_seq OWNED BY revoker.audit_events.id;

--
-- Name: audit_genesis; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.audit_genesis (
    migrated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    rows_brought_in bigint NOT NULL,
    last_id bigint,
    txid xid8 DEFAULT pg_current_xact_id() NOT NULL
);

--
-- Name: credential_intake; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.credential_intake (
    request_id uuid NOT NULL,
    credential text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    key_id text,
    sealed bytea,
    CONSTRAINT credential_intake_credential_check CHECK (((char_length(credential) >= 1) AND (char_length(credential) <= 8192))),
    CONSTRAINT credential_intake_one_form CHECK ((((credential IS NULL) <> (sealed IS NULL)) AND ((sealed IS NULL) = (key_id IS NULL)))),
    CONSTRAINT credential_intake_sealed_check CHECK ((octet_length(sealed) <= 16384))
);

--
-- Name: deletion_states; Type: VIEW; Schema: revoker; Owner: -
--

CREATE VIEW revoker.deletion_states AS
 SELECT d.id,
    d.account_reference,
    d.client_ids,
    d.state,
    d.outcome,
    d.requested_by,
    d.requested_at,
    d.completed_at
   FROM revoker.account_deletions d;

--
-- Name: erasure_requests; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.erasure_requests (
    code text NOT NULL,
    provider text NOT NULL,
    client_id text NOT NULL,
    user_id text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    grants_ended integer DEFAULT 0 NOT NULL,
    state text DEFAULT 'received'::text NOT NULL,
    justification text,
    decided_at timestamp with time zone,
    decided_by text,
    CONSTRAINT erasure_requests_decided CHECK (((state = 'received'::text) = ((decided_at IS NULL) AND (decided_by IS NULL)))),
    CONSTRAINT erasure_requests_decided_by_check CHECK (((char_length(decided_by) >= 1) AND (char_length(decided_by) <= 200))),
    CONSTRAINT erasure_requests_grants_ended_check CHECK ((grants_ended >= 0)),
    CONSTRAINT erasure_requests_justification_check CHECK (((char_length(justification) >= 1) AND (char_length(justification) <= 2000))),
    CONSTRAINT erasure_requests_justified CHECK (((state = 'refused'::text) = (justification IS NOT NULL))),
    CONSTRAINT erasure_requests_state_check CHECK ((state = ANY (ARRAY['received'::text, 'deleted'::text, 'refused'::text])))
);

--
-- Name: outbox_events; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.outbox_events (
    "position" bigint NOT NULL,
    txid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    type text NOT NULL,
    client_id text NOT NULL,
    occurred_at timestamp with time zone DEFAULT now() NOT NULL,
    request_id uuid,
    external_reference text,
    apple_user_id text,
    outcome text,
    error_code text,
    notification_id text,
    event_time timestamp with time zone,
    provider text,
    checkpoint jsonb,
    grant_id uuid,
    deletion jsonb,
    erasure_code text,
    CONSTRAINT outbox_events_apple_user_id_check CHECK ((char_length(apple_user_id) <= 255)),
    CONSTRAINT outbox_events_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT outbox_events_error_code_check CHECK ((char_length(error_code) <= 100)),
    CONSTRAINT outbox_events_external_reference_check CHECK ((char_length(external_reference) <= 255)),
    CONSTRAINT outbox_events_notification_id_check CHECK ((char_length(notification_id) <= 255)),
    CONSTRAINT outbox_events_outcome_check CHECK ((char_length(outcome) <= 100)),
    CONSTRAINT outbox_events_provider_check CHECK ((provider ~ '^[a-z][a-z0-9_]{0,31}$'::text)),
    CONSTRAINT outbox_events_type_check CHECK (((type = ANY (ARRAY['revocation.succeeded'::text, 'revocation.failed'::text, 'revocation.cancelled'::text, 'audit.checkpoint'::text, 'audit.checkpoint_refused'::text, 'grant.held'::text, 'grant.failed'::text, 'account.deletion_requested'::text, 'account.deletion_completed'::text, 'database.write_lost'::text])) OR ((type ~ '^[a-z][a-z0-9_]{0,31}\.[a-z][a-z0-9_]{0,63}$'::text) AND starts_with(type, (provider || '.'::text)))))
);

--
-- Name: events; Type: VIEW; Schema: revoker; Owner: -
--

CREATE VIEW revoker.events AS
 SELECT e.txid,
    e."position",
    (((e.txid)::text || '-'::text) || (e."position")::text) AS cursor,
    e.id,
    e.type,
    e.client_id,
    e.occurred_at,
    e.request_id,
    e.external_reference,
    e.apple_user_id,
    e.outcome,
    e.error_code,
    e.notification_id,
    e.event_time,
    e.provider,
    e.checkpoint,
    e.grant_id,
    e.deletion,
    e.erasure_code
   FROM revoker.outbox_events e
  WHERE (e.txid < pg_snapshot_xmin(pg_current_snapshot()));

--
-- Name: google_security_events; Type: VIEW; Schema: revoker; Owner: -
--

CREATE VIEW revoker.google_security_events AS
 SELECT m.id,
    m.message_id AS jti,
    m.client_id,
    (m.details ->> 'audience'::text) AS audience,
    m.type,
    (m.details ->> 'type_uri'::text) AS type_uri,
    m.user_id AS google_user_id,
    (m.details ->> 'reason'::text) AS reason,
    m.issued_at,
    m.issuer,
    m.key_id,
    m.received_at
   FROM revoker.provider_messages m
  WHERE (m.provider = 'google'::text);

--
-- Name: grant_counts; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.grant_counts (
    client_id text NOT NULL,
    provider text NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL
);

--
-- Name: grant_states; Type: VIEW; Schema: revoker; Owner: -
--

CREATE VIEW revoker.grant_states AS
 SELECT g.id,
    g.provider,
    g.client_id,
    g.account_reference,
    g.user_id,
    g.user_source,
    g.registered_kind,
    g.state,
    g.end_reason,
    g.created_at,
    g.updated_at,
    g.held_at,
    g.ended_at,
    g.deletion_id,
    g.validated_at
   FROM revoker.grants g;

--
-- Name: intake_keys; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.intake_keys (
    key_id text NOT NULL,
    public_key bytea NOT NULL,
    is_current boolean DEFAULT false NOT NULL,
    published_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT intake_keys_key_id_check CHECK ((key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT intake_keys_public_key_check CHECK (((octet_length(public_key) >= 64) AND (octet_length(public_key) <= 4096)))
);

--
-- Name: outbox_events_position_seq; Type: SEQUENCE; Schema: revoker; Owner: -
--

CREATE SEQUENCE revoker.outbox_events_position_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: outbox_events_position_seq; Type: SEQUENCE OWNED BY; Schema: revoker; Owner: -
--

ALTER SEQUENCE revoker.outbox_events_position_seq OWNED BY revoker.outbox_events."position";

--
-- Name: provider_messages_id_seq; Type: SEQUENCE; Schema: revoker; Owner: -
--

CREATE SEQUENCE revoker.provider_messages_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: provider_messages_id_seq; Type: SEQUENCE OWNED BY; Schema: revoker; Owner: -
--

ALTER SEQUENCE revoker.provider_messages_id_seq OWNED BY revoker.provider_messages.id;

--
-- Name: request_counts; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.request_counts (
    client_id text NOT NULL,
    state text NOT NULL,
    outcome text NOT NULL,
    n bigint NOT NULL
);

--
-- Name: revocation_requests; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.revocation_requests (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    client_id text NOT NULL,
    external_reference text NOT NULL,
    apple_user_id text,
    credential_kind text NOT NULL,
    enqueued_kind text NOT NULL,
    sealed_credential bytea,
    credential_key_id text,
    credential_digest bytea NOT NULL,
    redirect_uri text,
    state text DEFAULT 'pending'::text NOT NULL,
    outcome text,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 8 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    fencing_token bigint DEFAULT 0 NOT NULL,
    last_error_code text,
    last_error_description text,
    requeued_from uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    provider text DEFAULT 'apple'::text NOT NULL,
    purpose text DEFAULT 'revoke'::text NOT NULL,
    grant_id uuid,
    deletion_id uuid,
    trace_parent text,
    CONSTRAINT revocation_requests_apple_user_id_check CHECK (((char_length(apple_user_id) >= 1) AND (char_length(apple_user_id) <= 255))),
    CONSTRAINT revocation_requests_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT revocation_requests_client_id_check CHECK (((char_length(client_id) >= 1) AND (char_length(client_id) <= 255))),
    CONSTRAINT revocation_requests_credential_digest_check CHECK ((octet_length(credential_digest) = 32)),
    CONSTRAINT revocation_requests_credential_kind_check CHECK ((credential_kind = ANY (ARRAY['authorization_code'::text, 'refresh_token'::text, 'access_token'::text, 'identity_token'::text]))),
    CONSTRAINT revocation_requests_enqueued_kind_check CHECK ((enqueued_kind = ANY (ARRAY['authorization_code'::text, 'refresh_token'::text, 'access_token'::text, 'identity_token'::text]))),
    CONSTRAINT revocation_requests_external_reference_check CHECK (((char_length(external_reference) >= 1) AND (char_length(external_reference) <= 255))),
    CONSTRAINT revocation_requests_final_erased CHECK (((state = ANY (ARRAY['pending'::text, 'running'::text])) OR (sealed_credential IS NULL) OR ((state = 'failed'::text) AND (outcome = 'client_misconfigured'::text)))),
    CONSTRAINT revocation_requests_last_error_code_check CHECK ((char_length(last_error_code) <= 100)),
    CONSTRAINT revocation_requests_last_error_description_check CHECK ((char_length(last_error_description) <= 500)),
    CONSTRAINT revocation_requests_lease_iff_running CHECK (((state = 'running'::text) = ((lease_owner IS NOT NULL) AND (lease_expires_at IS NOT NULL)))),
    CONSTRAINT revocation_requests_lease_owner_check CHECK (((char_length(lease_owner) >= 1) AND (char_length(lease_owner) <= 200))),
    CONSTRAINT revocation_requests_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT revocation_requests_outcome_check CHECK ((outcome = ANY (ARRAY['revoked'::text, 'already_invalid'::text, 'revoked_by_user'::text, 'held'::text, 'live'::text, 'code_rejected'::text, 'exchange_lost'::text, 'subject_mismatch'::text, 'exhausted'::text, 'client_misconfigured'::text, 'rejected'::text, 'cancelled'::text]))),
    CONSTRAINT revocation_requests_outcome_matches_state CHECK ((((state = ANY (ARRAY['pending'::text, 'running'::text])) AND (outcome IS NULL) AND (finished_at IS NULL)) OR ((state = 'succeeded'::text) AND (outcome = ANY (ARRAY['revoked'::text, 'already_invalid'::text, 'revoked_by_user'::text, 'held'::text, 'live'::text])) AND (finished_at IS NOT NULL)) OR ((state = 'failed'::text) AND (outcome = ANY (ARRAY['code_rejected'::text, 'exchange_lost'::text, 'subject_mismatch'::text, 'exhausted'::text, 'client_misconfigured'::text, 'rejected'::text])) AND (finished_at IS NOT NULL)) OR ((state = 'cancelled'::text) AND (outcome = 'cancelled'::text) AND (finished_at IS NOT NULL)))),
    CONSTRAINT revocation_requests_provider_check CHECK ((provider ~ '^[a-z][a-z0-9_]{0,31}$'::text)),
    CONSTRAINT revocation_requests_purpose_check CHECK ((purpose = ANY (ARRAY['revoke'::text, 'hold'::text, 'validate'::text]))),
    CONSTRAINT revocation_requests_purpose_outcome CHECK ((((outcome = 'held'::text) <= (purpose = 'hold'::text)) AND ((outcome = 'live'::text) <= (purpose = 'validate'::text)) AND ((purpose = ANY (ARRAY['hold'::text, 'validate'::text])) <= (grant_id IS NOT NULL)))),
    CONSTRAINT revocation_requests_redirect_uri_check CHECK (((char_length(redirect_uri) >= 1) AND (char_length(redirect_uri) <= 2048))),
    CONSTRAINT revocation_requests_sealed_with_key CHECK (((sealed_credential IS NULL) = (credential_key_id IS NULL))),
    CONSTRAINT revocation_requests_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT revocation_requests_trace_parent_check CHECK (revoker.is_trace_parent(trace_parent))
);

--
-- Name: schema_migrations; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: ui_sessions; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.ui_sessions (
    token_hash bytea NOT NULL,
    key_name text NOT NULL,
    key_sha256 bytea NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT ui_sessions_csrf_token_check CHECK (((char_length(csrf_token) >= 32) AND (char_length(csrf_token) <= 100))),
    CONSTRAINT ui_sessions_expiry CHECK ((expires_at > created_at)),
    CONSTRAINT ui_sessions_key_name_check CHECK (((char_length(key_name) >= 1) AND (char_length(key_name) <= 200))),
    CONSTRAINT ui_sessions_key_sha256_check CHECK ((octet_length(key_sha256) = 32)),
    CONSTRAINT ui_sessions_token_hash_check CHECK ((octet_length(token_hash) = 32))
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.webhook_deliveries (
    endpoint text NOT NULL,
    cursor_txid xid8,
    cursor_position bigint,
    delivered bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    fencing_token bigint DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    failing_since timestamp with time zone,
    parked_since timestamp with time zone,
    last_attempt_at timestamp with time zone,
    last_status integer,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT webhook_deliveries_cursor_whole CHECK (((cursor_txid IS NULL) = (cursor_position IS NULL))),
    CONSTRAINT webhook_deliveries_delivered_check CHECK ((delivered >= 0)),
    CONSTRAINT webhook_deliveries_endpoint_check CHECK ((endpoint ~ '^[A-Za-z0-9._-]{1,64}$'::text)),
    CONSTRAINT webhook_deliveries_last_error_check CHECK ((char_length(last_error) <= 300)),
    CONSTRAINT webhook_deliveries_last_status_check CHECK (((last_status >= 100) AND (last_status <= 599))),
    CONSTRAINT webhook_deliveries_lease_owner_check CHECK (((char_length(lease_owner) >= 1) AND (char_length(lease_owner) <= 200))),
    CONSTRAINT webhook_deliveries_lease_whole CHECK (((lease_owner IS NULL) = (lease_expires_at IS NULL))),
    CONSTRAINT webhook_deliveries_parked_while_failing CHECK (((parked_since IS NULL) OR (failing_since IS NOT NULL)))
);

--
-- Name: workers; Type: TABLE; Schema: revoker; Owner: -
--

CREATE TABLE revoker.workers (
    owner text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    locked_at timestamp with time zone DEFAULT now() NOT NULL,
    lock_lost_at timestamp with time zone,
    call_rates jsonb DEFAULT '{}'::jsonb NOT NULL,
    call_rates_at timestamp with time zone,
    CONSTRAINT workers_call_rates_check CHECK ((jsonb_typeof(call_rates) = 'object'::text)),
    CONSTRAINT workers_owner_check CHECK (((char_length(owner) >= 1) AND (char_length(owner) <= 200)))
);

--
-- Name: audit_events id; Type: DEFAULT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_events ALTER COLUMN id SET DEFAULT nextval('revoker.audit_events_id_seq'::regclass);

--
-- Name: outbox_events position; Type: DEFAULT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.outbox_events ALTER COLUMN "position" SET DEFAULT nextval('revoker.outbox_events_position_seq'::regclass);

--
-- Name: provider_messages id; Type: DEFAULT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.provider_messages ALTER COLUMN id SET DEFAULT nextval('revoker.provider_messages_id_seq'::regclass);

--
-- Name: account_deletions account_deletions_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.account_deletions
    ADD CONSTRAINT account_deletions_pkey PRIMARY KEY (id);

--
-- Name: app_pauses app_pauses_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.app_pauses
    ADD CONSTRAINT app_pauses_pkey PRIMARY KEY (client_id);

--
-- Name: apps apps_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.apps
    ADD CONSTRAINT apps_pkey PRIMARY KEY (client_id);

--
-- Name: audit_archived_checkpoints audit_archived_checkpoints_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archived_checkpoints
    ADD CONSTRAINT audit_archived_checkpoints_pkey PRIMARY KEY (seq);

--
-- Name: audit_archived_requests audit_archived_requests_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archived_requests
    ADD CONSTRAINT audit_archived_requests_pkey PRIMARY KEY (request_id);

--
-- Name: audit_archives audit_archives_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archives
    ADD CONSTRAINT audit_archives_pkey PRIMARY KEY (id);

--
-- Name: audit_chains audit_chains_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_chains
    ADD CONSTRAINT audit_chains_pkey PRIMARY KEY (chain_key);

--
-- Name: audit_checkpoints audit_checkpoints_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_checkpoints
    ADD CONSTRAINT audit_checkpoints_pkey PRIMARY KEY (seq);

--
-- Name: audit_checkpoints audit_checkpoints_txid_from_key; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_checkpoints
    ADD CONSTRAINT audit_checkpoints_txid_from_key UNIQUE (txid_from);

--
-- Name: audit_events audit_events_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id, occurred_at);

--
-- Name: credential_intake credential_intake_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.credential_intake
    ADD CONSTRAINT credential_intake_pkey PRIMARY KEY (request_id);

--
-- Name: erasure_requests erasure_requests_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.erasure_requests
    ADD CONSTRAINT erasure_requests_pkey PRIMARY KEY (code);

--
-- Name: grants grants_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (id);

--
-- Name: grants grants_registered_once; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.grants
    ADD CONSTRAINT grants_registered_once UNIQUE (client_id, registered_digest);

--
-- Name: intake_keys intake_keys_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.intake_keys
    ADD CONSTRAINT intake_keys_pkey PRIMARY KEY (key_id);

--
-- Name: outbox_events outbox_events_id_key; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.outbox_events
    ADD CONSTRAINT outbox_events_id_key UNIQUE (id);

--
-- Name: outbox_events outbox_events_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.outbox_events
    ADD CONSTRAINT outbox_events_pkey PRIMARY KEY ("position");

--
-- Name: provider_messages provider_messages_erasure_code_key; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.provider_messages
    ADD CONSTRAINT provider_messages_erasure_code_key UNIQUE (erasure_code);

--
-- Name: provider_messages provider_messages_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.provider_messages
    ADD CONSTRAINT provider_messages_pkey PRIMARY KEY (id);

--
-- Name: provider_messages provider_messages_provider_message_id_key; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.provider_messages
    ADD CONSTRAINT provider_messages_provider_message_id_key UNIQUE (provider, message_id);

--
-- Name: revocation_requests revocation_requests_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.revocation_requests
    ADD CONSTRAINT revocation_requests_pkey PRIMARY KEY (id);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

--
-- Name: ui_sessions ui_sessions_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.ui_sessions
    ADD CONSTRAINT ui_sessions_pkey PRIMARY KEY (token_hash);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (endpoint);

--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (owner);

--
-- Name: account_deletions_account; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX account_deletions_account ON revoker.account_deletions USING btree (account_reference, requested_at, id);

--
-- Name: account_deletions_fanning_out; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX account_deletions_fanning_out ON revoker.account_deletions USING btree (requested_at, id) WHERE ((state = 'pending'::text) AND (NOT fanned_out));

--
-- Name: account_deletions_one_live; Type: INDEX; Schema: revoker; Owner: -
--

CREATE UNIQUE INDEX account_deletions_one_live ON revoker.account_deletions USING btree (account_reference, COALESCE(client_ids, '{}'::text[])) WHERE (state = 'pending'::text);

--
-- Name: audit_archived_requests_client; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_archived_requests_client ON revoker.audit_archived_requests USING btree (client_id, requested_at);

--
-- Name: audit_archived_requests_reference; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_archived_requests_reference ON revoker.audit_archived_requests USING btree (external_reference, requested_at);

--
-- Name: audit_archived_requests_requested; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_archived_requests_requested ON revoker.audit_archived_requests USING btree (requested_at, enqueued_id);

--
-- Name: audit_archived_requests_users; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_archived_requests_users ON revoker.audit_archived_requests USING gin (user_ids);

--
-- Name: audit_events_apple_user; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_apple_user ON ONLY revoker.audit_events USING btree (apple_user_id, occurred_at, id) WHERE (apple_user_id IS NOT NULL);

--
-- Name: audit_events_chain; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_chain ON ONLY revoker.audit_events USING btree (chain_key, chain_seq);

--
-- Name: audit_events_client; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_client ON ONLY revoker.audit_events USING btree (client_id, occurred_at, id);

--
-- Name: audit_events_reference; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_reference ON ONLY revoker.audit_events USING btree (external_reference, occurred_at, id);

--
-- Name: audit_events_occurred; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_occurred ON ONLY revoker.audit_events USING btree (occurred_at, id);

--
-- Name: audit_events_write_lost; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_write_lost ON ONLY revoker.audit_events USING btree (occurred_at) WHERE (event = 'write_lost'::text);

--
-- Name: audit_events_request; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_request ON ONLY revoker.audit_events USING btree (request_id, occurred_at, id);

--
-- Name: audit_events_txid; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX audit_events_txid ON ONLY revoker.audit_events USING btree (txid, id);

--
-- Name: erasure_requests_user; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX erasure_requests_user ON revoker.erasure_requests USING btree (provider, client_id, user_id);

--
-- Name: grants_account; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX grants_account ON revoker.grants USING btree (account_reference, created_at, id);

--
-- Name: grants_created; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX grants_created ON revoker.grants USING btree (created_at, id);

--
-- Name: grants_deletion; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX grants_deletion ON revoker.grants USING btree (deletion_id) WHERE (deletion_id IS NOT NULL);

--
-- Name: grants_user; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX grants_user ON revoker.grants USING btree (provider, client_id, user_id) WHERE (state = ANY (ARRAY['pending'::text, 'held'::text, 'revoking'::text]));

--
-- Name: grants_validation_due; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX grants_validation_due ON revoker.grants USING btree (COALESCE(validated_at, held_at), id) WHERE (state = 'held'::text);

--
-- Name: intake_keys_one_current; Type: INDEX; Schema: revoker; Owner: -
--

CREATE UNIQUE INDEX intake_keys_one_current ON revoker.intake_keys USING btree (is_current) WHERE is_current;

--
-- Name: outbox_events_client_order; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX outbox_events_client_order ON revoker.outbox_events USING btree (client_id, txid, "position");

--
-- Name: outbox_events_order; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX outbox_events_order ON revoker.outbox_events USING btree (txid, "position");

--
-- Name: provider_messages_received; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX provider_messages_received ON revoker.provider_messages USING btree (received_at, id);

--
-- Name: provider_messages_user; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX provider_messages_user ON revoker.provider_messages USING btree (provider, client_id, user_id) WHERE ends_grants;

--
-- Name: revocation_requests_apple_user; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_apple_user ON revoker.revocation_requests USING btree (apple_user_id, created_at) WHERE (apple_user_id IS NOT NULL);

--
-- Name: revocation_requests_claim; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_claim ON revoker.revocation_requests USING btree (((credential_kind <> 'authorization_code'::text)), run_after, id) WHERE (state = 'pending'::text);

--
-- Name: revocation_requests_created; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_created ON revoker.revocation_requests USING btree (created_at, id);

--
-- Name: revocation_requests_deletion; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_deletion ON revoker.revocation_requests USING btree (deletion_id) WHERE (deletion_id IS NOT NULL);

--
-- Name: revocation_requests_external_reference; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_external_reference ON revoker.revocation_requests USING btree (external_reference, created_at);

--
-- Name: revocation_requests_finished; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_finished ON revoker.revocation_requests USING btree (finished_at) WHERE (finished_at IS NOT NULL);

--
-- Name: revocation_requests_grant; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_grant ON revoker.revocation_requests USING btree (grant_id) WHERE (grant_id IS NOT NULL);

--
-- Name: revocation_requests_lease_expiry; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_lease_expiry ON revoker.revocation_requests USING btree (lease_expires_at) WHERE (state = 'running'::text);

--
-- Name: revocation_requests_lease_owner; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_lease_owner ON revoker.revocation_requests USING btree (lease_owner) WHERE (state = 'running'::text);

--
-- Name: revocation_requests_one_live; Type: INDEX; Schema: revoker; Owner: -
--

CREATE UNIQUE INDEX revocation_requests_one_live ON revoker.revocation_requests USING btree (client_id, external_reference) WHERE ((state = ANY (ARRAY['pending'::text, 'running'::text])) AND (grant_id IS NULL));

--
-- Name: revocation_requests_one_live_per_grant; Type: INDEX; Schema: revoker; Owner: -
--

CREATE UNIQUE INDEX revocation_requests_one_live_per_grant ON revoker.revocation_requests USING btree (grant_id) WHERE ((state = ANY (ARRAY['pending'::text, 'running'::text])) AND (grant_id IS NOT NULL) AND (purpose <> 'validate'::text));

--
-- Name: revocation_requests_one_validation; Type: INDEX; Schema: revoker; Owner: -
--

CREATE UNIQUE INDEX revocation_requests_one_validation ON revoker.revocation_requests USING btree (grant_id) WHERE ((state = ANY (ARRAY['pending'::text, 'running'::text])) AND (purpose = 'validate'::text));

--
-- Name: revocation_requests_reference; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX revocation_requests_reference ON revoker.revocation_requests USING btree (client_id, external_reference, created_at);

--
-- Name: ui_sessions_expires; Type: INDEX; Schema: revoker; Owner: -
--

CREATE INDEX ui_sessions_expires ON revoker.ui_sessions USING btree (expires_at);

--
-- Name: account_deletions account_deletions_trace_parent; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER account_deletions_trace_parent BEFORE INSERT ON revoker.account_deletions FOR EACH ROW EXECUTE FUNCTION revoker.session_trace_parent_default();

--
-- Name: audit_archived_checkpoints audit_archived_checkpoints_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_archived_checkpoints_no_truncate BEFORE TRUNCATE ON revoker.audit_archived_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_archives audit_archives_no_change; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_archives_no_change BEFORE DELETE OR UPDATE ON revoker.audit_archives FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_archives audit_archives_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_archives_no_truncate BEFORE TRUNCATE ON revoker.audit_archives FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_chains audit_chains_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_chains_no_truncate BEFORE TRUNCATE ON revoker.audit_chains FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_checkpoints audit_checkpoints_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON revoker.audit_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_checkpoints audit_checkpoints_no_update_or_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_checkpoints_no_update_or_delete BEFORE DELETE OR UPDATE ON revoker.audit_checkpoints FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: audit_checkpoints audit_checkpoints_outbox; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_checkpoints_outbox AFTER INSERT ON revoker.audit_checkpoints FOR EACH ROW EXECUTE FUNCTION revoker.outbox_audit_checkpoint();

--
-- Name: audit_events audit_events_checkpoint_refused; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_events_checkpoint_refused AFTER INSERT ON revoker.audit_events FOR EACH ROW WHEN ((new.event = 'checkpoint_refused'::text)) EXECUTE FUNCTION revoker.outbox_checkpoint_refused();

--
-- Name: audit_events audit_events_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON revoker.audit_events FOR EACH STATEMENT EXECUTE FUNCTION revoker.audit_events_refuse_change();

--
-- Name: audit_events audit_events_no_update_or_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_events_no_update_or_delete BEFORE DELETE OR UPDATE ON revoker.audit_events FOR EACH ROW EXECUTE FUNCTION revoker.audit_events_refuse_change();

--
-- Name: audit_genesis audit_genesis_no_change; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER audit_genesis_no_change BEFORE DELETE OR UPDATE ON revoker.audit_genesis FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: grants grants_count_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_count_delete AFTER DELETE ON revoker.grants REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();

ALTER TABLE revoker.grants ENABLE ALWAYS TRIGGER grants_count_delete;

--
-- Name: grants grants_count_insert; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_count_insert AFTER INSERT ON revoker.grants REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();

ALTER TABLE revoker.grants ENABLE ALWAYS TRIGGER grants_count_insert;

--
-- Name: grants grants_count_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_count_truncate AFTER TRUNCATE ON revoker.grants FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();

ALTER TABLE revoker.grants ENABLE ALWAYS TRIGGER grants_count_truncate;

--
-- Name: grants grants_count_update; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_count_update AFTER UPDATE ON revoker.grants REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_grants();

ALTER TABLE revoker.grants ENABLE ALWAYS TRIGGER grants_count_update;

--
-- Name: grants grants_deletion_moved; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_deletion_moved AFTER UPDATE OF state ON revoker.grants FOR EACH ROW WHEN (((new.deletion_id IS NOT NULL) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION revoker.grants_deletion_moved();

--
-- Name: grants grants_join_live_deletion; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_join_live_deletion BEFORE INSERT ON revoker.grants FOR EACH ROW EXECUTE FUNCTION revoker.grants_join_live_deletion();

--
-- Name: grants grants_trace_parent; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_trace_parent BEFORE INSERT ON revoker.grants FOR EACH ROW EXECUTE FUNCTION revoker.session_trace_parent_default();

--
-- Name: grants grants_validation_moot; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER grants_validation_moot AFTER UPDATE OF state ON revoker.grants FOR EACH ROW WHEN (((old.state = 'held'::text) AND (new.state <> 'held'::text))) EXECUTE FUNCTION revoker.grants_validation_moot();

--
-- Name: outbox_events outbox_events_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER outbox_events_no_truncate BEFORE TRUNCATE ON revoker.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: outbox_events outbox_events_no_update_or_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER outbox_events_no_update_or_delete BEFORE DELETE OR UPDATE ON revoker.outbox_events FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: outbox_events outbox_events_notify; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER outbox_events_notify AFTER INSERT ON revoker.outbox_events FOR EACH STATEMENT EXECUTE FUNCTION revoker.notify_outbox_events();

--
-- Name: provider_messages provider_messages_end_grants; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER provider_messages_end_grants AFTER INSERT ON revoker.provider_messages FOR EACH ROW WHEN (new.ends_grants) EXECUTE FUNCTION revoker.grants_told_gone();

--
-- Name: provider_messages provider_messages_erasure; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER provider_messages_erasure AFTER INSERT ON revoker.provider_messages FOR EACH ROW WHEN ((new.erasure_code IS NOT NULL)) EXECUTE FUNCTION revoker.erasure_opened();

--
-- Name: provider_messages provider_messages_no_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER provider_messages_no_truncate BEFORE TRUNCATE ON revoker.provider_messages FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: provider_messages provider_messages_no_update_or_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER provider_messages_no_update_or_delete BEFORE DELETE OR UPDATE ON revoker.provider_messages FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();

--
-- Name: provider_messages provider_messages_outbox; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER provider_messages_outbox AFTER INSERT ON revoker.provider_messages FOR EACH ROW WHEN ((new.event_type IS NOT NULL)) EXECUTE FUNCTION revoker.outbox_provider_message();

--
-- Name: revocation_requests revocation_requests_count_delete; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_count_delete AFTER DELETE ON revoker.revocation_requests REFERENCING OLD TABLE AS changed_old FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();

ALTER TABLE revoker.revocation_requests ENABLE ALWAYS TRIGGER revocation_requests_count_delete;

--
-- Name: revocation_requests revocation_requests_count_insert; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_count_insert AFTER INSERT ON revoker.revocation_requests REFERENCING NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();

ALTER TABLE revoker.revocation_requests ENABLE ALWAYS TRIGGER revocation_requests_count_insert;

--
-- Name: revocation_requests revocation_requests_count_truncate; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_count_truncate AFTER TRUNCATE ON revoker.revocation_requests FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();

ALTER TABLE revoker.revocation_requests ENABLE ALWAYS TRIGGER revocation_requests_count_truncate;

--
-- Name: revocation_requests revocation_requests_count_update; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_count_update AFTER UPDATE ON revoker.revocation_requests REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new FOR EACH STATEMENT EXECUTE FUNCTION revoker.count_requests();

ALTER TABLE revoker.revocation_requests ENABLE ALWAYS TRIGGER revocation_requests_count_update;

--
-- Name: revocation_requests revocation_requests_deletion_ended; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_deletion_ended AFTER UPDATE ON revoker.revocation_requests FOR EACH ROW WHEN (((new.deletion_id IS NOT NULL) AND (new.grant_id IS NULL) AND (old.state = ANY (ARRAY['pending'::text, 'running'::text])) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION revoker.deletion_request_ended();

--
-- Name: revocation_requests revocation_requests_hold_ended; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_hold_ended AFTER UPDATE ON revoker.revocation_requests FOR EACH ROW WHEN (((new.purpose = 'hold'::text) AND (old.state = ANY (ARRAY['pending'::text, 'running'::text])) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])) AND (new.outcome <> 'held'::text))) EXECUTE FUNCTION revoker.grants_hold_ended();

--
-- Name: revocation_requests revocation_requests_notify; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_notify AFTER INSERT ON revoker.revocation_requests FOR EACH STATEMENT EXECUTE FUNCTION revoker.notify_revocation_requests();

--
-- Name: revocation_requests revocation_requests_outbox; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_outbox AFTER UPDATE ON revoker.revocation_requests FOR EACH ROW WHEN (((old.state = ANY (ARRAY['pending'::text, 'running'::text])) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION revoker.outbox_revocation_final();

--
-- Name: revocation_requests revocation_requests_outbox_final_at_once; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_outbox_final_at_once AFTER INSERT ON revoker.revocation_requests FOR EACH ROW WHEN (((new.purpose = 'hold'::text) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION revoker.outbox_revocation_final();

--
-- Name: revocation_requests revocation_requests_revoke_ended; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_revoke_ended AFTER UPDATE ON revoker.revocation_requests FOR EACH ROW WHEN (((new.purpose = 'revoke'::text) AND (new.grant_id IS NOT NULL) AND (old.state = ANY (ARRAY['pending'::text, 'running'::text])) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION revoker.grants_revoke_ended();

--
-- Name: revocation_requests revocation_requests_trace_parent; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_trace_parent BEFORE INSERT ON revoker.revocation_requests FOR EACH ROW EXECUTE FUNCTION revoker.request_trace_parent();

--
-- Name: revocation_requests revocation_requests_validation_ended; Type: TRIGGER; Schema: revoker; Owner: -
--

CREATE TRIGGER revocation_requests_validation_ended AFTER UPDATE ON revoker.revocation_requests FOR EACH ROW WHEN (((new.purpose = 'validate'::text) AND (old.state = ANY (ARRAY['pending'::text, 'running'::text])) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION revoker.grants_validation_ended();

--
-- Name: audit_archived_checkpoints audit_archived_checkpoints_archive_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archived_checkpoints
    ADD CONSTRAINT audit_archived_checkpoints_archive_id_fkey FOREIGN KEY (archive_id) REFERENCES revoker.audit_archives(id);

--
-- Name: audit_archived_checkpoints audit_archived_checkpoints_seq_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archived_checkpoints
    ADD CONSTRAINT audit_archived_checkpoints_seq_fkey FOREIGN KEY (seq) REFERENCES revoker.audit_checkpoints(seq);

--
-- Name: audit_archived_requests audit_archived_requests_archive_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archived_requests
    ADD CONSTRAINT audit_archived_requests_archive_id_fkey FOREIGN KEY (archive_id) REFERENCES revoker.audit_archives(id);

--
-- Name: audit_archives audit_archives_first_checkpoint_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archives
    ADD CONSTRAINT audit_archives_first_checkpoint_fkey FOREIGN KEY (first_checkpoint) REFERENCES revoker.audit_checkpoints(seq);

--
-- Name: audit_archives audit_archives_last_checkpoint_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.audit_archives
    ADD CONSTRAINT audit_archives_last_checkpoint_fkey FOREIGN KEY (last_checkpoint) REFERENCES revoker.audit_checkpoints(seq);

--
-- Name: credential_intake credential_intake_request_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.credential_intake
    ADD CONSTRAINT credential_intake_request_id_fkey FOREIGN KEY (request_id) REFERENCES revoker.revocation_requests(id) ON DELETE CASCADE;

--
-- Name: erasure_requests erasure_requests_code_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.erasure_requests
    ADD CONSTRAINT erasure_requests_code_fkey FOREIGN KEY (code) REFERENCES revoker.provider_messages(erasure_code);

--
-- Name: grants grants_deletion_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.grants
    ADD CONSTRAINT grants_deletion_id_fkey FOREIGN KEY (deletion_id) REFERENCES revoker.account_deletions(id);

--
-- Name: revocation_requests revocation_requests_deletion_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.revocation_requests
    ADD CONSTRAINT revocation_requests_deletion_id_fkey FOREIGN KEY (deletion_id) REFERENCES revoker.account_deletions(id);

--
-- Name: revocation_requests revocation_requests_grant_id_fkey; Type: FK CONSTRAINT; Schema: revoker; Owner: -
--

ALTER TABLE ONLY revoker.revocation_requests
    ADD CONSTRAINT revocation_requests_grant_id_fkey FOREIGN KEY (grant_id) REFERENCES revoker.grants(id);

--
-- PostgreSQL database dump complete
--

