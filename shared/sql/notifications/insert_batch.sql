-- Inserts a batch with one statement; each row unless its owner already used its key
-- (the batch holds each key once). A sendAt in the past is due now. The input arrays are
-- parallel: $1 ids, $2 keys, $3 fingerprints, $4 recipients, $5 channels,
-- $6 priorities, $7 payloads, $8 sendAt (or NULL), $9 delaySeconds (or NULL),
-- $10 max attempts, $11 owners. Returns the ids inserted; wakes sweepers once if any is due.
WITH inserted AS (
    INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                               payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id)
    SELECT id, key, fingerprint, recipient, channel, priority, payload, due, due, max_attempts, owner
    FROM (SELECT *, greatest(coalesce(at, now() + after_s * interval '1 second'), now()) AS due
          FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int2[],
                      $7::jsonb[], $8::timestamptz[], $9::int4[], $10::int4[], $11::uuid[])
               AS i(id, key, fingerprint, recipient, channel, priority, payload, at, after_s,
                    max_attempts, owner)) AS input
    -- In key order: two batches sharing keys then wait for each other in the same order
    -- and cannot deadlock.
    ORDER BY key
    ON CONFLICT ((coalesce(owner_key_id, '00000000-0000-0000-0000-000000000000'::uuid)), idempotency_key) DO NOTHING
    RETURNING id, next_attempt_at
), woken AS (
    SELECT pg_notify('notify_queue_due', '')
    WHERE EXISTS (SELECT 1 FROM inserted WHERE next_attempt_at <= now())
)
SELECT id, (SELECT count(*) FROM woken) AS woken FROM inserted
