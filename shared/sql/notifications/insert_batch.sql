-- Inserts a batch with one statement; each row unless its owner already used its key
-- (the batch holds each key once). A sendAt in the past is due now. The audience rules
-- were applied before: suppressed rows are stored SUPPRESSED with their webhook events,
-- in this statement. Parallel arrays: $1 ids, $2 keys, $3 fingerprints, $4 recipients,
-- $5 channels, $6 priorities, $7 payloads, $8 sendAt (or NULL), $9 delaySeconds (or
-- NULL), $10 max attempts, $11 owners, $12 classes, $13 categories, $14 recipient ids,
-- $15 expiresAt (or NULL), $16 ttlSeconds (or NULL), $17 suppression reasons (NULL:
-- PENDING), $18 the due times quiet hours moved them from, $19 the keyed hashes of the
-- addresses to look up on the suppression list here (NULL: read before; see insert.sql).
-- Returns the ids inserted; wakes sweepers once if any is due.
WITH given AS (
    SELECT *, greatest(coalesce(at, now() + after_s * interval '1 second'), now()) AS due
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int2[],
                $7::jsonb[], $8::timestamptz[], $9::int4[], $10::int4[], $11::uuid[],
                $12::text[], $13::text[], $14::text[], $15::timestamptz[], $16::int4[],
                $17::text[], $18::timestamptz[], $19::text[])
         AS i(id, key, fingerprint, recipient, channel, priority, payload, at, after_s,
              max_attempts, owner, class, category, recipient_id, expires_at, ttl_s,
              reason, deferred_from, listed_hash)
), input AS (
    SELECT g.*,
           CASE WHEN EXISTS (SELECT 1 FROM suppressions s
                             WHERE s.channel = g.channel AND s.address_hash = g.listed_hash)
                THEN 'SUPPRESSED_ADDRESS' ELSE g.reason END AS suppressed
    FROM given g
), inserted AS (
    INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                               payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id,
                               class, category, recipient_id, expires_at, status, suppressed_at,
                               suppressed_reason, quiet_hours_deferred_from)
    SELECT id, key, fingerprint, recipient, channel, priority, payload, due, due, max_attempts,
           owner, class, category, recipient_id,
           coalesce(expires_at, due + ttl_s * interval '1 second'),
           CASE WHEN suppressed IS NULL THEN 'PENDING' ELSE 'SUPPRESSED' END,
           CASE WHEN suppressed IS NULL THEN NULL ELSE now() END, suppressed, deferred_from
    FROM input
    -- In key order: two batches sharing keys then wait for each other in the same order
    -- and cannot deadlock.
    ORDER BY key
    ON CONFLICT ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), idempotency_key) DO NOTHING
    RETURNING id, status, next_attempt_at
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.suppressed', id, status, 0, 0, now()
    FROM inserted WHERE status = 'SUPPRESSED'
), woken AS (
    SELECT pg_notify('notify_queue_due', '')
    WHERE EXISTS (SELECT 1 FROM inserted WHERE status = 'PENDING' AND next_attempt_at <= now())
)
SELECT id, (SELECT count(*) FROM woken) AS woken FROM inserted
