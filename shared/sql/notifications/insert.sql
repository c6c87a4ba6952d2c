-- Inserts one notification unless its owner already used the idempotency key: the unique
-- index notifications_idempotency_key_per_owner is the arbiter, so simultaneous
-- duplicates are safe. A sendAt in the past is due now (never earlier, so it does not
-- jump the claim order). The audience rules were applied before: a suppressed one is
-- stored SUPPRESSED with its webhook event, in this statement; one due now wakes
-- listening sweepers.
-- $1 id, $2 key, $3 fingerprint, $4 recipient, $5 channel, $6 priority, $7 payload,
-- $8 sendAt (or NULL), $9 delaySeconds (or NULL), $10 max attempts, $11 owner key,
-- $12 class, $13 category, $14 recipient id, $15 expiresAt (or NULL), $16 ttlSeconds
-- (or NULL, counted from the due time), $17 suppression reason (NULL: PENDING),
-- $18 the due time quiet hours moved it from, $19 the keyed hash of the recipient address
-- to look up on the suppression list here (NULL: the list was read before). A listed
-- address is SUPPRESSED_ADDRESS, whatever $17 says, as the audience rules rank it: a
-- single POST to a literal address then costs one statement, not a read and an insert.
WITH due AS (
    SELECT greatest(coalesce($8::timestamptz, now() + $9::int4 * interval '1 second'), now()) AS at,
           CASE WHEN EXISTS (SELECT 1 FROM suppressions s
                             WHERE s.channel = $5::text AND s.address_hash = $19::text)
                THEN 'SUPPRESSED_ADDRESS' ELSE $17::text END AS suppressed
), inserted AS (
    INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                               payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id,
                               class, category, recipient_id, expires_at, status, suppressed_at,
                               suppressed_reason, quiet_hours_deferred_from)
    SELECT $1, $2, $3, $4, $5, $6, $7, due.at, due.at, $10, $11, $12, $13, $14,
           coalesce($15::timestamptz, due.at + $16::int4 * interval '1 second'),
           CASE WHEN due.suppressed IS NULL THEN 'PENDING' ELSE 'SUPPRESSED' END,
           CASE WHEN due.suppressed IS NULL THEN NULL ELSE now() END, due.suppressed, $18
    FROM due
    ON CONFLICT ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), idempotency_key) DO NOTHING
    RETURNING id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.suppressed', id, status, 0, 0, now()
    FROM inserted WHERE status = 'SUPPRESSED'
), woken AS (
    SELECT pg_notify('notify_queue_due', '') FROM inserted
    WHERE status = 'PENDING' AND next_attempt_at <= now()
)
SELECT id, idempotency_key, recipient, channel, priority, status, scheduled_at, next_attempt_at,
       attempt_count, max_attempts, last_error, sent_at, failed_at, dead_lettered_at, cancelled_at,
       redrive_count, last_redriven_at, created_at, updated_at,
       provider_message_id, class, category, recipient_id, expires_at, suppressed_at,
       suppressed_reason, expired_at, quiet_hours_deferred_from,
       (SELECT count(*) FROM woken) AS woken
FROM inserted
