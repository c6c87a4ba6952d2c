-- Why: `queue_list_waiting_by_owner` serves one query, a client's listing of a waiting
-- status, which always names the client's key (`owner_key_id = $1`). Notifications made
-- without a key (the admin key, the local runner, a single-tenant deployment) were indexed
-- in it all the same: one entry per notification that no query could reach, 100 B per
-- notification after a drain of 100,000 unowned ones (docs/BENCHMARKS.md, B7). It now
-- holds only owned rows, as `notifications_list_by_owner` always has.
DROP INDEX queue_list_waiting_by_owner;
CREATE INDEX queue_list_waiting_by_owner ON queue (owner_key_id, status, created_at, id)
    WHERE status <> 'PROCESSING' AND owner_key_id IS NOT NULL;
