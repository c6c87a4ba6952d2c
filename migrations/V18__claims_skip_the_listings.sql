-- Why: a claim turns a queue row from PENDING to PROCESSING, and `status` is a key of the
-- queue's two listings, so every claim wrote a second entry into each of them (besides
-- the primary key and the lease index) for a state that lasts one provider call. The
-- listings now index only the statuses that wait (PENDING, FAILED, DEAD_LETTERED); the
-- PROCESSING rows, one per delivery in flight, are listed from queue_lease_expiry and
-- sorted. A claim writes two index entries instead of four; after a drain of 100,000 the
-- queue holds 490 B per notification instead of 560 (docs/BENCHMARKS.md).
--
-- The keys are ascending (a backward scan serves newest first as well): a new row's
-- entry then goes next to the newest ones at the right of the index, not at the left.
DROP INDEX queue_list_by_status;
DROP INDEX queue_list_by_owner_status;
CREATE INDEX queue_list_waiting ON queue (status, created_at, id)
    WHERE status <> 'PROCESSING';
CREATE INDEX queue_list_waiting_by_owner ON queue (owner_key_id, status, created_at, id)
    WHERE status <> 'PROCESSING';
