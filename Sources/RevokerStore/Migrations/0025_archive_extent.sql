-- 0025_archive_extent.sql: which checkpoints an archive holds (issue 37, item 6).
--
-- An archive file signs its extent (header, counts, chain starts, its first and last
-- checkpoint). `revoker audit verify-archive --with-database` also ties the file's first and
-- last checkpoint to the ones recorded here when the months were dropped, so that a file cut
-- at either end and signed again is told from the one written. audit_archived_checkpoints
-- cannot say it: a checkpoint split across two archives names only the later one.
-- Null for archives recorded before this migration, and for one that held no row.

ALTER TABLE revoker.audit_archives
    ADD COLUMN first_checkpoint bigint REFERENCES revoker.audit_checkpoints (seq),
    ADD COLUMN last_checkpoint  bigint REFERENCES revoker.audit_checkpoints (seq);

INSERT INTO revoker.schema_migrations (version, name, checksum)
VALUES (25, '0025_archive_extent', NULL)
ON CONFLICT (version) DO NOTHING;
