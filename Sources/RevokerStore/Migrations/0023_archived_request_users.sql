-- 0023_archived_request_users.sql: an archived request is found by every user id its rows name.
--
-- The compliance search finds a live request by any of its rows' user ids (an identity token's
-- subject may differ from the id the backend gave). 0022 kept only an archived request's last
-- one, so a search by the first found the request while it was live and not once archived.
-- Archives written before this keep the one id they recorded.

ALTER TABLE revoker.audit_archived_requests ADD COLUMN user_ids text[] NOT NULL DEFAULT '{}';
UPDATE revoker.audit_archived_requests SET user_ids = ARRAY[user_id] WHERE user_id IS NOT NULL;
DROP INDEX revoker.audit_archived_requests_user;
CREATE INDEX audit_archived_requests_users ON revoker.audit_archived_requests USING gin (user_ids);
