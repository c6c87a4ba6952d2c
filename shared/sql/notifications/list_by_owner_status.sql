-- Newest first, strictly after the cursor ($3, $4), $5 rows (one more than a page tells
-- whether a next page exists); $6 and $7 narrow to a class and a category
-- (NULL = any), filtered on the way. A waiting status is read from
-- queue_list_waiting_by_owner; PROCESSING from queue_lease_expiry and sorted; a final one
-- by walking notifications_list_by_owner newest first. Only the branch the status calls
-- for runs; the page's rows are then read by id.
WITH page AS (
    (SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
     WHERE $2 IN ('PENDING', 'FAILED', 'DEAD_LETTERED')
       AND q.owner_key_id = $1 AND q.status = $2 AND q.status <> 'PROCESSING'
       AND (q.created_at, q.id) < ($3, $4)
       AND ($6::text IS NULL OR n.class = $6) AND ($7::text IS NULL OR n.category = $7)
     ORDER BY q.created_at DESC, q.id DESC
     LIMIT $5)
    UNION ALL
    (SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
     WHERE $2 = 'PROCESSING'
       AND q.owner_key_id = $1 AND q.status = 'PROCESSING' AND (q.created_at, q.id) < ($3, $4)
       AND ($6::text IS NULL OR n.class = $6) AND ($7::text IS NULL OR n.category = $7)
     ORDER BY q.created_at DESC, q.id DESC
     LIMIT $5)
    UNION ALL
    (SELECT n.id FROM notifications n
     WHERE $2 NOT IN ('PENDING', 'PROCESSING', 'FAILED', 'DEAD_LETTERED')
       AND n.owner_key_id = $1 AND n.status = $2 AND (n.created_at, n.id) < ($3, $4)
       AND ($6::text IS NULL OR n.class = $6) AND ($7::text IS NULL OR n.category = $7)
     ORDER BY n.created_at DESC, n.id DESC
     LIMIT $5)
)
SELECT n.id, n.idempotency_key, n.recipient, n.channel, n.priority, n.status, n.scheduled_at, n.next_attempt_at,
       n.attempt_count, n.max_attempts, n.last_error, n.sent_at, n.failed_at, n.dead_lettered_at, n.cancelled_at,
       n.redrive_count, n.last_redriven_at, n.created_at, n.updated_at,
       n.provider_message_id, n.class, n.category, n.recipient_id, n.expires_at, n.suppressed_at,
       n.suppressed_reason, n.expired_at, n.quiet_hours_deferred_from
FROM page JOIN notifications n ON n.id = page.id
ORDER BY n.created_at DESC, n.id DESC
