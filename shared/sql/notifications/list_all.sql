-- Newest first, strictly after the cursor ($1, $2), $3 rows (one more than a page tells
-- whether a next page exists); $4 and $5 narrow to a class and a category
-- (NULL = any), filtered on the way. Served by notifications_list_all.
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from
FROM notifications
WHERE (created_at, id) < ($1, $2)
  AND ($4::text IS NULL OR class = $4) AND ($5::text IS NULL OR category = $5)
ORDER BY created_at DESC, id DESC
LIMIT $3
