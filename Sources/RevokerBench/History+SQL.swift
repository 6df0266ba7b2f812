extension HistoryGenerator {
    /// The apps of the history: three Apple apps and a Google client.
    static let apps: [(clientID: String, provider: String)] = [
        ("com.example.history.notes", "apple"), ("com.example.history.photos", "apple"), ("com.example.history.web", "apple"),
        ("3000-history.apps.googleusercontent.com", "google"),
    ]

    /// The generator's own schema, beside `revoker` and never part of it: its plan, the days
    /// written, the audit rows each outcome leaves (as the worker writes them, demo section 5)
    /// and the function that writes one day.
    static let schema: [String] = [
        "CREATE SCHEMA IF NOT EXISTS revoker_history",
        """
        CREATE TABLE IF NOT EXISTS revoker_history.plan (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            audit_rows bigint NOT NULL, grants bigint NOT NULL, first_day date NOT NULL, days int NOT NULL,
            parts_per_day int NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS revoker_history.parts (
            day date NOT NULL, part int NOT NULL, revocations int NOT NULL, grants int NOT NULL, notifications int NOT NULL,
            audit_rows bigint NOT NULL, next_index bigint NOT NULL, PRIMARY KEY (day, part))
        """,
        "DROP TABLE IF EXISTS revoker_history.steps",
        """
        CREATE TABLE revoker_history.steps (
            outcome text, kind text, step int, event text, at_ms int, apple_endpoint text, google_endpoint text,
            status int, error text, detail text, attempt int, by_worker boolean, PRIMARY KEY (outcome, kind, step))
        """,
        """
        INSERT INTO revoker_history.steps VALUES
          ('revoked','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('revoked','refresh_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked','refresh_token',3,'token_validated',290,'/auth/token','/token',200,NULL,NULL,1,true),
          ('revoked','refresh_token',4,'id_token_verified',291,NULL,NULL,NULL,NULL,'sub matches',1,true),
          ('revoked','refresh_token',5,'revoked',330,'/auth/revoke','/revoke',200,NULL,'token_type_hint=refresh_token',1,true),
          ('revoked','refresh_token',6,'succeeded',331,NULL,NULL,NULL,NULL,'outcome=revoked',1,true),
          ('revoked','refresh_token',7,'credential_erased',332,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked','authorization_code',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('revoked','authorization_code',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked','authorization_code',3,'exchange_started',200,'/auth/token','/token',NULL,NULL,NULL,1,true),
          ('revoked','authorization_code',4,'token_exchanged',280,'/auth/token','/token',200,NULL,NULL,1,true),
          ('revoked','authorization_code',5,'id_token_verified',282,NULL,NULL,NULL,NULL,'sub not compared (none given)',1,true),
          ('revoked','authorization_code',6,'revoked',320,'/auth/revoke','/revoke',200,NULL,'token_type_hint=refresh_token',1,true),
          ('revoked','authorization_code',7,'succeeded',321,NULL,NULL,NULL,NULL,'outcome=revoked',1,true),
          ('revoked','authorization_code',8,'credential_erased',322,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked','access_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('revoked','access_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked','access_token',3,'revoked',260,'/auth/revoke','/revoke',200,NULL,'token_type_hint=access_token',1,true),
          ('revoked','access_token',4,'succeeded',261,NULL,NULL,NULL,NULL,'outcome=revoked',1,true),
          ('revoked','access_token',5,'credential_erased',262,NULL,NULL,NULL,NULL,NULL,1,true),
          ('already_invalid','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('already_invalid','refresh_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('already_invalid','refresh_token',3,'apple_error',250,'/auth/token','/token',400,'invalid_grant','HTTP 400 invalid_grant',1,true),
          ('already_invalid','refresh_token',4,'succeeded',251,NULL,NULL,NULL,NULL,'outcome=already_invalid',1,true),
          ('already_invalid','refresh_token',5,'credential_erased',252,NULL,NULL,NULL,NULL,NULL,1,true),
          ('code_rejected','authorization_code',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('code_rejected','authorization_code',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('code_rejected','authorization_code',3,'exchange_started',200,'/auth/token','/token',NULL,NULL,NULL,1,true),
          ('code_rejected','authorization_code',4,'apple_error',270,'/auth/token','/token',400,'invalid_grant','HTTP 400 invalid_grant',1,true),
          ('code_rejected','authorization_code',5,'failed',271,NULL,NULL,NULL,NULL,'outcome=code_rejected',1,true),
          ('code_rejected','authorization_code',6,'credential_erased',272,NULL,NULL,NULL,NULL,NULL,1,true),
          ('subject_mismatch','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('subject_mismatch','refresh_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('subject_mismatch','refresh_token',3,'token_validated',290,'/auth/token','/token',200,NULL,NULL,1,true),
          ('subject_mismatch','refresh_token',4,'id_token_mismatch',291,NULL,NULL,NULL,NULL,'the grant belongs to another user than the request names',1,true),
          ('subject_mismatch','refresh_token',5,'failed',292,NULL,NULL,NULL,NULL,'outcome=subject_mismatch',1,true),
          ('subject_mismatch','refresh_token',6,'credential_erased',293,NULL,NULL,NULL,NULL,NULL,1,true),
          ('exhausted','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('exhausted','refresh_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('exhausted','refresh_token',3,'apple_error',5180,'/auth/token','/token',503,'temporarily_unavailable','HTTP 503',1,true),
          ('exhausted','refresh_token',4,'retry_scheduled',5181,NULL,NULL,NULL,NULL,'in 60 s',1,true),
          ('exhausted','refresh_token',5,'claimed',65200,NULL,NULL,NULL,NULL,NULL,2,true),
          ('exhausted','refresh_token',6,'apple_error',70200,'/auth/token','/token',503,'temporarily_unavailable','HTTP 503',2,true),
          ('exhausted','refresh_token',7,'retry_scheduled',70201,NULL,NULL,NULL,NULL,'in 240 s',2,true),
          ('exhausted','refresh_token',8,'claimed',310300,NULL,NULL,NULL,NULL,NULL,3,true),
          ('exhausted','refresh_token',9,'apple_error',315300,'/auth/token','/token',503,'temporarily_unavailable','HTTP 503',3,true),
          ('exhausted','refresh_token',10,'failed',315301,NULL,NULL,NULL,NULL,'outcome=exhausted',3,true),
          ('exhausted','refresh_token',11,'credential_erased',315302,NULL,NULL,NULL,NULL,NULL,3,true),
          ('cancelled','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('cancelled','refresh_token',2,'cancelled',4000,NULL,NULL,NULL,NULL,NULL,0,false),
          ('cancelled','refresh_token',3,'credential_erased',4001,NULL,NULL,NULL,NULL,NULL,0,false),
          ('revoked_by_user','refresh_token',1,'enqueued',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('revoked_by_user','refresh_token',2,'claimed',180,NULL,NULL,NULL,NULL,NULL,1,true),
          ('revoked_by_user','refresh_token',3,'succeeded',181,NULL,NULL,NULL,NULL,'outcome=revoked_by_user',1,true),
          ('revoked_by_user','refresh_token',4,'credential_erased',182,NULL,NULL,NULL,NULL,NULL,1,true),
          ('held','authorization_code',1,'grant_registered',0,NULL,NULL,NULL,NULL,NULL,0,false),
          ('held','authorization_code',2,'claimed',40,NULL,NULL,NULL,NULL,NULL,1,true),
          ('held','authorization_code',3,'exchange_started',50,'/auth/token','/token',NULL,NULL,NULL,1,true),
          ('held','authorization_code',4,'token_exchanged',130,'/auth/token','/token',200,NULL,NULL,1,true),
          ('held','authorization_code',5,'id_token_verified',131,NULL,NULL,NULL,NULL,'sub taken from the identity token',1,true),
          ('held','authorization_code',6,'grant_held',132,NULL,NULL,NULL,NULL,NULL,1,true),
          ('held','authorization_code',7,'succeeded',133,NULL,NULL,NULL,NULL,'outcome=held',1,true)
        """,
        // The outcome of revocation i, and its kind: the mix of a deployment's year (demo section 4).
        """
        CREATE OR REPLACE FUNCTION revoker_history.outcome(i bigint) RETURNS text[]
            LANGUAGE sql IMMUTABLE AS $$
            SELECT CASE
                WHEN h < 520 THEN ARRAY['revoked', 'refresh_token']
                WHEN h < 780 THEN ARRAY['revoked', 'authorization_code']
                WHEN h < 840 THEN ARRAY['revoked', 'access_token']
                WHEN h < 920 THEN ARRAY['already_invalid', 'refresh_token']
                WHEN h < 950 THEN ARRAY['code_rejected', 'authorization_code']
                WHEN h < 960 THEN ARRAY['subject_mismatch', 'refresh_token']
                WHEN h < 970 THEN ARRAY['exhausted', 'refresh_token']
                WHEN h < 985 THEN ARRAY['cancelled', 'refresh_token']
                ELSE ARRAY['revoked_by_user', 'refresh_token'] END
            FROM (SELECT abs(hashint8(i * 7919)) % 1000 AS h) AS x
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION revoker_history.rows_per_revocation() RETURNS float8
            LANGUAGE sql STABLE AS $$
            SELECT avg(n)::float8 FROM (
                SELECT (SELECT count(*) FROM revoker_history.steps s
                        WHERE s.outcome = o[1] AND s.kind = o[2]) AS n
                FROM (SELECT revoker_history.outcome(i) AS o FROM generate_series(1, 10000) AS i) AS x) AS y
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION revoker_history.write_part(
            p_day date, p_part int, p_parts int, p_first bigint, p_revocations int, p_grant_ids uuid[], p_sealed bytea[], p_key_id text,
            p_notifications int, p_apps text[], p_providers text[]) RETURNS bigint
            LANGUAGE plpgsql AS $$
        DECLARE
            v_span interval := interval '86400 s' / p_parts;
            v_start timestamptz := p_day::timestamptz + p_part * v_span;
            v_jti text := 'history-' || p_day || '-' || p_part || '-';
            v_apps int := cardinality(p_apps);
            v_grants int := coalesce(cardinality(p_grant_ids), 0);
            v_rows bigint;
        BEGIN
            -- The rows of the queue and the outbox are written as they stand at the day's end, with
            -- that day's times: the queue's triggers (which would date events now) are off for them.
            PERFORM set_config('session_replication_role', 'replica', true);
            CREATE TEMP TABLE h_requests ON COMMIT DROP AS
            SELECT gen_random_uuid() AS id, i, o[1] AS outcome, o[2] AS kind,
                   p_apps[1 + (abs(hashint8(i)) % v_apps)] AS client_id, p_providers[1 + (abs(hashint8(i)) % v_apps)] AS provider,
                   'acct-' || i AS reference,
                   CASE WHEN i % 2 = 0 THEN lpad(i::text, 6, '0') || '.history' END AS user_id,
                   v_start + ((i - p_first) + 0.5) * (v_span / greatest(p_revocations, 1)) AS created_at
            FROM (SELECT i, revoker_history.outcome(i) AS o FROM generate_series(p_first, p_first + p_revocations - 1) AS i) AS x;
            CREATE TEMP TABLE h_grants ON COMMIT DROP AS
            SELECT g.id, g.sealed, gen_random_uuid() AS hold_id, p_first + p_revocations + g.n - 1 AS i,
                   p_apps[1 + (abs(hashint8(p_first + p_revocations + g.n)) % v_apps)] AS client_id,
                   p_providers[1 + (abs(hashint8(p_first + p_revocations + g.n)) % v_apps)] AS provider,
                   v_start + (g.n - 0.5) * (v_span / greatest(v_grants, 1)) AS created_at
            FROM unnest(p_grant_ids, p_sealed) WITH ORDINALITY AS g(id, sealed, n);

            INSERT INTO revoker.revocation_requests
                (id, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind, credential_digest,
                 state, outcome, attempts, run_after, last_error_code, created_at, updated_at, finished_at, provider, purpose)
            SELECT r.id, r.client_id, r.reference, r.user_id, r.kind, r.kind, sha256(int8send(r.i)),
                   CASE WHEN r.outcome IN ('revoked', 'already_invalid', 'revoked_by_user') THEN 'succeeded'
                        WHEN r.outcome = 'cancelled' THEN 'cancelled' ELSE 'failed' END,
                   r.outcome, s.attempts, r.created_at,
                   CASE r.outcome WHEN 'code_rejected' THEN 'invalid_grant' WHEN 'exhausted' THEN 'temporarily_unavailable'
                                  WHEN 'subject_mismatch' THEN 'subject_mismatch' END,
                   r.created_at, r.created_at + s.took, r.created_at + s.took, r.provider, 'revoke'
            FROM h_requests r
            JOIN (SELECT outcome, kind, max(attempt) AS attempts, max(at_ms) * interval '1 ms' AS took
                  FROM revoker_history.steps GROUP BY outcome, kind) AS s USING (outcome, kind);

            INSERT INTO revoker.grants
                (id, provider, client_id, account_reference, user_id, user_source, registered_kind, registered_digest, state,
                 sealed_token, token_key_id, hold_request_id, created_at, updated_at, held_at)
            SELECT g.id, g.provider, g.client_id, 'user-' || g.i,
                   CASE WHEN g.provider = 'apple' THEN lpad(g.i::text, 6, '0') || '.history' ELSE (100000000000000000000 + g.i)::text END,
                   'verified_id_token', 'authorization_code', sha256(int8send(g.i)), 'held', g.sealed, p_key_id, g.hold_id,
                   g.created_at, g.created_at + interval '133 ms', g.created_at + interval '133 ms'
            FROM h_grants g;
            INSERT INTO revoker.revocation_requests
                (id, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind, credential_digest,
                 state, outcome, attempts, run_after, created_at, updated_at, finished_at, provider, purpose, grant_id)
            SELECT g.hold_id, g.client_id, 'user-' || g.i,
                   CASE WHEN g.provider = 'apple' THEN lpad(g.i::text, 6, '0') || '.history' ELSE (100000000000000000000 + g.i)::text END,
                   'authorization_code', 'authorization_code', sha256(int8send(g.i)), 'succeeded', 'held', 1, g.created_at,
                   g.created_at, g.created_at + interval '133 ms', g.created_at + interval '133 ms', g.provider, 'hold', g.id
            FROM h_grants g;

            INSERT INTO revoker.outbox_events
                (type, client_id, occurred_at, request_id, external_reference, apple_user_id, outcome, error_code, provider, grant_id)
            SELECT CASE WHEN q.purpose = 'hold' THEN 'grant.held' ELSE 'revocation.' || q.state END, q.client_id, q.finished_at,
                   q.id, q.external_reference, q.apple_user_id, q.outcome, CASE WHEN q.state = 'failed' THEN q.last_error_code END,
                   q.provider, q.grant_id
            FROM revoker.revocation_requests q
            WHERE q.id IN (SELECT id FROM h_requests UNION ALL SELECT hold_id FROM h_grants)
            ORDER BY q.finished_at;

            -- Notifications the providers sent that day about users Revoker does not hold.
            INSERT INTO revoker.provider_messages
                (provider, message_id, client_id, type, user_id, ends_grants, event_type, event_time, issued_at, issuer, key_id,
                 details, received_at)
            SELECT 'apple', v_jti || n, p_apps[1 + n % 3], t, lpad((p_first + n)::text, 6, '0') || '.elsewhere', false,
                   'apple.' || replace(t, '-', '_'), v_start + n * v_span / (p_notifications + 1),
                   v_start + n * v_span / (p_notifications + 1), 'https://appleid.apple.com', 'history-key',
                   jsonb_build_object('type_as_sent', t, 'had_email', true),
                   v_start + n * v_span / (p_notifications + 1) + interval '200 ms'
            FROM generate_series(1, p_notifications) AS n, LATERAL (SELECT CASE WHEN n % 2 = 0 THEN 'email-disabled' ELSE 'email-enabled' END AS t) AS x;

            PERFORM set_config('session_replication_role', 'origin', true);
            -- Every audit row through the real trigger, chained, in the order its times say.
            PERFORM set_config('revoker.history_clock', 'on', true);
            INSERT INTO revoker.audit_events
                (occurred_at, request_id, client_id, external_reference, apple_user_id, event, attempt, actor,
                 apple_endpoint, http_status, apple_error, apple_error_description, latency_ms, detail)
            SELECT at, request_id, client_id, reference, user_id, event, attempt, actor, endpoint, status, error, description, latency, detail
            FROM (
                SELECT r.created_at + s.at_ms * interval '1 ms' AS at, r.id AS request_id, r.client_id, r.reference, r.user_id, s.event,
                       s.attempt, CASE WHEN s.by_worker THEN 'history-worker-' || (1 + abs(hashint8(r.i)) % 2) ELSE 'api:history' END AS actor,
                       CASE WHEN r.provider = 'apple' THEN s.apple_endpoint ELSE s.google_endpoint END AS endpoint, s.status,
                       s.error, CASE WHEN s.error IS NOT NULL THEN s.detail END AS description,
                       CASE WHEN s.status IS NOT NULL THEN 60 + abs(hashint8(r.i + s.step)) % 90 END AS latency,
                       CASE WHEN s.event = 'enqueued' THEN 'provider=' || r.provider || ' kind=' || r.kind
                            WHEN s.error IS NULL THEN s.detail END AS detail, s.step
                FROM h_requests r JOIN revoker_history.steps s USING (outcome, kind)
                UNION ALL
                SELECT g.created_at + s.at_ms * interval '1 ms', g.hold_id, g.client_id, 'user-' || g.i,
                       CASE WHEN g.provider = 'apple' THEN lpad(g.i::text, 6, '0') || '.history' ELSE (100000000000000000000 + g.i)::text END,
                       s.event, s.attempt, CASE WHEN s.by_worker THEN 'history-worker-1' ELSE 'api:history' END,
                       CASE WHEN g.provider = 'apple' THEN s.apple_endpoint ELSE s.google_endpoint END, s.status, NULL, NULL,
                       CASE WHEN s.status IS NOT NULL THEN 80 END,
                       CASE WHEN s.event = 'grant_registered' THEN 'provider=' || g.provider || ' kind=authorization_code' ELSE s.detail END,
                       s.step
                FROM h_grants g JOIN revoker_history.steps s ON s.outcome = 'held'
                UNION ALL
                SELECT n.received_at, NULL, n.client_id, NULL, n.user_id, 'apple_notification', NULL, 'apple', NULL, NULL, NULL,
                       NULL, NULL, 'type=' || n.type, 0
                FROM revoker.provider_messages n WHERE n.provider = 'apple' AND n.message_id LIKE v_jti || '%'
            ) AS e
            ORDER BY at, request_id, step;
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            INSERT INTO revoker_history.parts
            VALUES (p_day, p_part, p_revocations, v_grants, p_notifications, v_rows, p_first + p_revocations + v_grants);
            RETURN v_rows;
        END;
        $$
        """,
    ]
}
