-- Newest first, strictly after the cursor ($2, $3), $4 rows (one more than a page tells
-- whether a next page exists); $5 and $6 narrow to a class and a category
-- (NULL = any), filtered on the way. Served by notifications_list_by_owner.
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from
FROM notifications
WHERE owner_key_id = $1
  AND (created_at, id) < ($2, $3)
  AND ($5::text IS NULL OR class = $5) AND ($6::text IS NULL OR category = $6)
ORDER BY created_at DESC, id DESC
LIMIT $4
