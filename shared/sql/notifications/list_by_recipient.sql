-- Newest first, strictly after the cursor ($3, $4), $5 rows (one more than a page tells
-- whether a next page exists); $6 and $7 narrow to a class and a category
-- (NULL = any), filtered on the way. Served by
-- notifications_by_address (the hash finds the rows, the address itself is rechecked),
-- the rest filtered.
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from
FROM notifications
WHERE hashtextextended(lower(recipient), 0) = hashtextextended(lower($1), 0)
  AND recipient = $1 AND ($2::text IS NULL OR status = $2)
  AND (created_at, id) < ($3, $4)
  AND ($6::text IS NULL OR class = $6) AND ($7::text IS NULL OR category = $7)
ORDER BY created_at DESC, id DESC
LIMIT $5
