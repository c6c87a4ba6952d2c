-- The notification owner $2 (NULL: anonymous) created with idempotency key $1, with the
-- fingerprint that decides replay or conflict.
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from,
       fingerprint
FROM notifications
WHERE coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid) = coalesce($2, '00000000-0000-0000-0000-000000000000'::uuid)
  AND idempotency_key = $1
