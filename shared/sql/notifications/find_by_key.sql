-- The notification holding an idempotency key, with what decides replay or conflict.
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       fingerprint, owner_key_id
FROM notifications
WHERE idempotency_key = $1
