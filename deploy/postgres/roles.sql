-- Roles for Revoker. Run as a superuser (or a role with CREATEROLE) after the migrations,
-- in the Revoker database:  psql -v ON_ERROR_STOP=1 -f deploy/postgres/roles.sql
-- Idempotent. The roles are NOLOGIN groups: grant them to login roles, e.g.
--   CREATE ROLE revoker_app LOGIN PASSWORD '...' IN ROLE revoker_worker;
--
-- revoker_worker   the service (worker, HTTP API, CLI): reads and writes the queue, opens and
--                  seals the SQL intake, registers its apps and intake keys, appends audit
--                  events. It cannot UPDATE/DELETE/TRUNCATE the audit trail (not granted, and
--                  the triggers refuse it anyway), cannot choose an audit row's id, time or
--                  recording role (a trigger stamps them), and as it does not own the tables
--                  it cannot disable those triggers.
-- revoker_enqueuer app backends that enqueue inside their own transaction: EXECUTE on
--                  revoker.enqueue_revocation and revoker.register_grant only, plus SELECT on the
--                  request's state columns and revoker.grant_states (never a credential column,
--                  the intake or the grants' tokens).
-- revoker_auditor  compliance: SELECT on revoker.audit_events, its chains, genesis and checkpoints,
--                  the providers' notifications, and the schema's version (revoker.schema_migrations:
--                  names and checksums of the migrations applied), which `revoker audit verify` checks
--                  before it trusts its own queries. Enough for docs/audit.md's commands for compliance
--                  staff (Tests/RevokerCLITests/RoleCommandTests.swift runs each one as this role).
--
-- The outbox (revoker.outbox_events) is written only by its triggers (SECURITY DEFINER, owned
-- by the schema owner): the service's role reads it but cannot add, change or remove an event.
--
-- Migrations run as the schema owner (a role distinct from these), which owns the tables and
-- the SECURITY DEFINER enqueue function.

DO $$
BEGIN
    CREATE ROLE revoker_worker NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
DO $$
BEGIN
    CREATE ROLE revoker_enqueuer NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
DO $$
BEGIN
    CREATE ROLE revoker_auditor NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;

GRANT USAGE ON SCHEMA revoker TO revoker_worker, revoker_enqueuer, revoker_auditor;

-- Worker
GRANT SELECT ON revoker.schema_migrations TO revoker_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON revoker.revocation_requests TO revoker_worker;
GRANT SELECT, INSERT, DELETE ON revoker.credential_intake TO revoker_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON revoker.app_pauses TO revoker_worker;
GRANT SELECT, INSERT ON revoker.audit_events TO revoker_worker;
GRANT USAGE ON SEQUENCE revoker.audit_events_id_seq TO revoker_worker;
-- Migration 0003: a serving process registers its apps and publishes its intake keys.
GRANT SELECT, INSERT, DELETE ON revoker.apps TO revoker_worker;
GRANT SELECT, INSERT, UPDATE ON revoker.intake_keys TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.enqueue_revocation(text, text, text, text, text, text, integer) TO revoker_worker;
-- Migration 0004: the outbox is read.
GRANT SELECT ON revoker.outbox_events, revoker.events TO revoker_worker;
-- Migration 0026: every provider's messages are appended to one table (the two before it are
-- views of it now, readable by the names they had).
GRANT SELECT, INSERT ON revoker.provider_messages TO revoker_worker;
GRANT USAGE ON SEQUENCE revoker.provider_messages_id_seq TO revoker_worker;
GRANT SELECT ON revoker.apple_notifications, revoker.google_security_events TO revoker_worker;
-- Migration 0029: a person's erasure request is opened with its message (a trigger) and decided
-- by the app's backend through the API.
GRANT SELECT, UPDATE ON revoker.erasure_requests TO revoker_worker;
-- Migration 0005: the workers keep each webhook endpoint's place in the feed, and `revoker prune`
-- deletes old events every endpoint has received, through the function only.
GRANT SELECT, INSERT, UPDATE ON revoker.webhook_deliveries TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.prune_events(timestamptz, text[]) TO revoker_worker;
-- Migration 0006: the trigger (SECURITY DEFINER) chains every row, the service signs and appends
-- checkpoints and reads all of it to verify.
GRANT SELECT ON revoker.audit_chains, revoker.audit_genesis TO revoker_worker;
-- Migration 0022: what was archived, for verifying and for receipts of the rows still here.
GRANT SELECT ON revoker.audit_archives, revoker.audit_archived_checkpoints, revoker.audit_archived_requests TO revoker_worker;
GRANT SELECT, INSERT ON revoker.audit_checkpoints TO revoker_worker;
-- Migration 0007: the chains' heads move when a checkpoint covers their rows, through the
-- function only (SECURITY DEFINER), never by the service's hand.
GRANT EXECUTE ON FUNCTION revoker.audit_advance_heads() TO revoker_worker;
-- Migration 0020: the checkpoint service keeps three months of partitions ahead.
GRANT EXECUTE ON FUNCTION revoker.audit_ensure_partitions() TO revoker_worker;
-- Migration 0008: the compliance pages keep their sessions (hashed tokens) in the database.
GRANT SELECT, INSERT, UPDATE, DELETE ON revoker.ui_sessions TO revoker_worker;
-- Migration 0011: each worker registers itself beside its liveness lock, and rescuers mark and forget dead ones.
GRANT SELECT, INSERT, UPDATE, DELETE ON revoker.workers TO revoker_worker;
-- Migration 0014: the service holds grants in custody (sealed tokens) and registers them.
GRANT SELECT, INSERT, UPDATE ON revoker.grants TO revoker_worker;
GRANT SELECT ON revoker.grant_states TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.register_grant(text, text, text, text, text, text, text) TO revoker_worker;
-- Migration 0015: the service asks for account deletions (the functions write the requests and events).
GRANT SELECT ON revoker.account_deletions, revoker.deletion_states TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.start_account_deletion(text, text[], text) TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.complete_deletion(uuid) TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.request_account_deletion(text, text[]) TO revoker_worker;
-- Migration 0016: the service schedules the periodic validation of held grants.
GRANT EXECUTE ON FUNCTION revoker.schedule_grant_validations(interval, integer, text) TO revoker_worker;
-- Migration 0024: workers fan large deletions out in batches, and the event feed asks whether a
-- deletion's trace may go with its events.
GRANT EXECUTE ON FUNCTION revoker.fan_out_deletions(integer, text) TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.deletion_trace_shared(uuid) TO revoker_worker;
-- Migration 0019: status reads the counts triggers keep, and folds their deltas now and then.
GRANT SELECT ON revoker.request_counts, revoker.grant_counts TO revoker_worker;
GRANT EXECUTE ON FUNCTION revoker.compact_counts() TO revoker_worker;

-- Enqueuer: the function (SECURITY DEFINER) does the writing.
GRANT EXECUTE ON FUNCTION revoker.enqueue_revocation(text, text, text, text, text, text, integer) TO revoker_enqueuer;
GRANT SELECT (id, client_id, external_reference, apple_user_id, credential_kind, enqueued_kind, redirect_uri, state,
              outcome, attempts, max_attempts, run_after, last_error_code, last_error_description, requeued_from,
              created_at, updated_at, finished_at)
    ON revoker.revocation_requests TO revoker_enqueuer;
-- The event feed, for backends in the same database (LISTEN revoker_events needs no grant).
GRANT SELECT ON revoker.events TO revoker_enqueuer;
-- Migration 0014: register grants at sign-in and see where they stand, never a token.
GRANT EXECUTE ON FUNCTION revoker.register_grant(text, text, text, text, text, text, text) TO revoker_enqueuer;
GRANT SELECT ON revoker.grant_states TO revoker_enqueuer;
-- Migration 0015: delete an account by its reference and see how its deletions stand.
GRANT EXECUTE ON FUNCTION revoker.request_account_deletion(text, text[]) TO revoker_enqueuer;
GRANT SELECT ON revoker.deletion_states TO revoker_enqueuer;

-- Auditor
GRANT SELECT ON revoker.audit_events, revoker.provider_messages, revoker.apple_notifications, revoker.google_security_events TO revoker_auditor;
GRANT SELECT ON revoker.erasure_requests TO revoker_auditor;
GRANT SELECT ON revoker.audit_chains, revoker.audit_genesis, revoker.audit_checkpoints TO revoker_auditor;
GRANT SELECT ON revoker.audit_archives, revoker.audit_archived_checkpoints, revoker.audit_archived_requests TO revoker_auditor;
-- `revoker audit verify` refuses to judge a trail whose schema this build does not know.
GRANT SELECT ON revoker.schema_migrations TO revoker_auditor;
-- Migration 0014: grants held, without their tokens.
GRANT SELECT ON revoker.grant_states TO revoker_auditor;
-- Migration 0015: account deletions.
GRANT SELECT ON revoker.deletion_states TO revoker_auditor;
