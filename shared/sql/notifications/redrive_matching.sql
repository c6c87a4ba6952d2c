-- Redrives up to $8 notifications matching the filter ($1 status, $2 recipient, $3
-- channel, $4 error text, $5 created before, $6 created after; NULL = any), oldest first,
-- with a fresh set of $7 attempts. A notification whose person was erased has no one
-- to go to and is never redriven. Rows another redrive holds are skipped, so concurrent
-- calls never redrive one twice. The filter is the same as count_matching's; the status
-- (FAILED or DEAD_LETTERED) is read from queue_list_waiting.
WITH picked AS (
    SELECT n.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.status = $1 AND q.status <> 'PROCESSING' AND n.status = $1
      AND ($2::text IS NULL OR n.recipient = $2) AND n.recipient <> '[erased]'
      AND ($3::text IS NULL OR n.channel = $3)
      AND ($4::text IS NULL OR strpos(lower(coalesce(n.last_error, '')), lower($4)) > 0)
      AND ($5::timestamptz IS NULL OR n.created_at < $5)
      AND ($6::timestamptz IS NULL OR n.created_at > $6)
    ORDER BY q.created_at, q.id LIMIT $8 FOR UPDATE OF q, n SKIP LOCKED
), redriven AS (
    UPDATE notifications n
    SET status = 'PENDING', next_attempt_at = now(), attempt_count = 0, max_attempts = $7,
        failed_at = NULL, dead_lettered_at = NULL, reconciliation_granted = false,
        redrive_count = n.redrive_count + 1, last_redriven_at = now(), updated_at = now()
    -- By primary key, as in claim_channel.sql: a join to picked could read the whole table.
    WHERE n.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING n.id
), woken AS (
    SELECT pg_notify('notify_queue_due', '') WHERE EXISTS (SELECT 1 FROM redriven)
)
SELECT (SELECT count(*) FROM redriven) AS redriven, (SELECT count(*) FROM woken) AS woken
