-- 0022_audit_archives.sql: months of the trail archived to a file and dropped (issue 27).
--
-- `revoker audit archive --before YYYY-MM` writes the months before it to a file that
-- `revoker audit verify-archive` checks offline, then records here what left, and detaches
-- and drops those months' partitions, in one transaction, after the file is on disk.
--
--   - revoker.audit_archives: one row per archive (what, where, its SHA-256, by whom).
--   - revoker.audit_chains.archived_seq/_hash (added by 0020, whose stamp reads them): each
--     archived chain's last archived row. The live trail's rows of the chain follow it (the
--     stamp goes on from it when no row of the chain is left), and `audit verify` starts the
--     chain there.
--   - revoker.audit_archived_checkpoints: each checkpoint that covers archived rows, with how
--     many; for one that also covers rows still here (or in a later archive), the archived
--     rows' leaves (id, 8 bytes big-endian, then the 32-byte hash, in id order), so that its
--     Merkle root is still recomputed from what is here.
--   - revoker.audit_archived_requests: each archived request as the compliance search shows it,
--     with the archive that holds its rows.
-- The checkpoints themselves stay: after the file is deleted at the end of retention, they
-- still show that rows existed, how many, and under which root.

CREATE TABLE revoker.audit_archives (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    before       timestamptz NOT NULL,
    months       text[]      NOT NULL,
    file_name    text        NOT NULL CHECK (char_length(file_name) BETWEEN 1 AND 1000),
    file_sha256  bytea       NOT NULL CHECK (octet_length(file_sha256) = 32),
    row_count    bigint      NOT NULL CHECK (row_count >= 0),
    first_id     bigint,
    last_id      bigint,
    archived_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    archived_by  text        NOT NULL DEFAULT session_user
);
CREATE TRIGGER audit_archives_no_change BEFORE UPDATE OR DELETE ON revoker.audit_archives
    FOR EACH ROW EXECUTE FUNCTION revoker.refuse_change();
CREATE TRIGGER audit_archives_no_truncate BEFORE TRUNCATE ON revoker.audit_archives
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

CREATE TABLE revoker.audit_archived_checkpoints (
    seq            bigint PRIMARY KEY REFERENCES revoker.audit_checkpoints (seq),
    archive_id     bigint NOT NULL REFERENCES revoker.audit_archives (id),
    archived_rows  bigint NOT NULL CHECK (archived_rows >= 1),
    leaves         bytea  CHECK (octet_length(leaves) % 40 = 0)
);
-- What the compliance search finds of an archived request (its enqueued row's id and time
-- keep the search's order and cursor), and in which archive its rows now are.
CREATE TABLE revoker.audit_archived_requests (
    request_id          uuid        PRIMARY KEY,
    archive_id          bigint      NOT NULL REFERENCES revoker.audit_archives (id),
    enqueued_id         bigint      NOT NULL,
    requested_at        timestamptz NOT NULL,
    requested_by        text        NOT NULL,
    client_id           text,
    external_reference  text,
    user_id             text,
    -- Every user id its rows named (an identity token's subject may differ from the id the
    -- backend gave): the search finds it by any, as it finds a live request; user_id is the last.
    user_ids            text[]      NOT NULL DEFAULT '{}',
    outcome             text,
    finished_at         timestamptz
);
CREATE INDEX audit_archived_requests_requested ON revoker.audit_archived_requests (requested_at, enqueued_id);
CREATE INDEX audit_archived_requests_reference ON revoker.audit_archived_requests (external_reference, requested_at);
CREATE INDEX audit_archived_requests_users ON revoker.audit_archived_requests USING gin (user_ids);
CREATE INDEX audit_archived_requests_client ON revoker.audit_archived_requests (client_id, requested_at);

CREATE TRIGGER audit_archived_checkpoints_no_truncate BEFORE TRUNCATE ON revoker.audit_archived_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION revoker.refuse_change();

-- No partition comes back for an archived month.
CREATE OR REPLACE FUNCTION revoker.audit_add_partitions(first timestamptz, last timestamptz) RETURNS integer
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
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

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (22, '0022_audit_archives', NULL)
ON CONFLICT (version) DO NOTHING;
