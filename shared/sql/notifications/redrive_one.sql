-- Redrives notification $2 if it is FAILED or DEAD_LETTERED: PENDING, due now, a fresh
-- set of $1 attempts, redrive_count + 1 (the generation that keys its next webhook event).
-- Not one whose person was erased: there is no one left to send it to.
WITH redriven AS (
    UPDATE notifications
    SET status = 'PENDING', next_attempt_at = now(), attempt_count = 0, max_attempts = $1,
        failed_at = NULL, dead_lettered_at = NULL, reconciliation_granted = false,
        redrive_count = redrive_count + 1, last_redriven_at = now(), updated_at = now()
    WHERE id = $2 AND status IN ('FAILED', 'DEAD_LETTERED') AND recipient <> '[erased]'
    RETURNING id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
              attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at,
              cancelled_at, redrive_count, last_redriven_at, created_at, updated_at,
              provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
              suppressed_reason, expired_at, quiet_hours_deferred_from
), woken AS (SELECT pg_notify('notify_queue_due', '') FROM redriven)
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
              attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at,
              cancelled_at, redrive_count, last_redriven_at, created_at, updated_at,
              provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
              suppressed_reason, expired_at, quiet_hours_deferred_from,
       (SELECT count(*) FROM woken) AS woken
FROM redriven
