-- Newest first, strictly after the cursor ($2, $3), $4 rows (one more than a page tells
-- whether a next page exists); $5 and $6 narrow to a class and a category
-- (NULL = any), filtered on the way. A waiting status (PENDING, FAILED, DEAD_LETTERED) is
-- read from queue_list_waiting; PROCESSING, a delivery in flight, from queue_lease_expiry
-- and sorted (there are as many as deliveries in flight); a final status by walking
-- notifications_list_all newest first (no index on notifications covers status: its
-- transitions stay HOT). Only the branch the status calls for runs; the page's rows are
-- then read by id.
WITH page AS (
    (SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
     WHERE $1 IN ('PENDING', 'FAILED', 'DEAD_LETTERED')
       AND q.status = $1 AND q.status <> 'PROCESSING' AND (q.created_at, q.id) < ($2, $3)
       AND ($5::text IS NULL OR n.class = $5) AND ($6::text IS NULL OR n.category = $6)
     ORDER BY q.created_at DESC, q.id DESC
     LIMIT $4)
    UNION ALL
    (SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
     WHERE $1 = 'PROCESSING'
       AND q.status = 'PROCESSING' AND (q.created_at, q.id) < ($2, $3)
       AND ($5::text IS NULL OR n.class = $5) AND ($6::text IS NULL OR n.category = $6)
     ORDER BY q.created_at DESC, q.id DESC
     LIMIT $4)
    UNION ALL
    (SELECT n.id FROM notifications n
     WHERE $1 NOT IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED')
       AND n.status = $1 AND (n.created_at, n.id) < ($2, $3)
       AND ($5::text IS NULL OR n.class = $5) AND ($6::text IS NULL OR n.category = $6)
     ORDER BY n.created_at DESC, n.id DESC
     LIMIT $4)
)
SELECT n.id, n.idempotency_key, n.recipient, n.channel, n.priority, n.status, n.scheduled_at, n.next_attempt_at,
       n.attempt_count, n.max_attempts, n.last_error, n.sent_at, n.failed_at, n.dead_lettered_at, n.cancelled_at,
       n.redrive_count, n.last_redriven_at, n.created_at, n.updated_at,
       n.provider_message_id, n.class, n.category, n.recipient_id, n.expires_at, n.suppressed_at,
       n.suppressed_reason, n.expired_at, n.quiet_hours_deferred_from
FROM page JOIN notifications n ON n.id = page.id
ORDER BY n.created_at DESC, n.id DESC
