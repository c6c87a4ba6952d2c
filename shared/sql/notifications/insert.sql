-- Inserts one notification unless its owner already used the idempotency key: the unique
-- index notifications_idempotency_key_per_owner is the arbiter, so simultaneous
-- duplicates are safe. A sendAt in the past is due now (never earlier, so it does not
-- jump the claim order). One due now wakes listening sweepers.
-- $1 id, $2 key, $3 fingerprint, $4 recipient, $5 channel, $6 priority, $7 payload,
-- $8 sendAt (or NULL), $9 delaySeconds (or NULL), $10 max attempts, $11 owner key.
WITH inserted AS (
    INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                               payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id)
    SELECT $1, $2, $3, $4, $5, $6, $7, due.at, due.at, $10, $11
    FROM (SELECT greatest(coalesce($8::timestamptz, now() + $9::int4 * interval '1 second'), now())
                 AS at) AS due
    ON CONFLICT ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), idempotency_key) DO NOTHING
    RETURNING id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id
), woken AS (
    SELECT pg_notify('notify_queue_due', '') FROM inserted WHERE next_attempt_at <= now()
)
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id,
       (SELECT count(*) FROM woken) AS woken
FROM inserted
