-- Turns up to $1 PENDING notifications whose expiresAt has passed into EXPIRED, soonest
-- expired first (read from the partial index queue_expiry), each with its webhook
-- event in the same statement. The claim already skips them; this makes the final status
-- visible and the event sent. Returns how many expired.
WITH due AS (
    SELECT q.id FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.status = 'PENDING' AND q.expires_at IS NOT NULL AND q.expires_at <= now()
      AND n.status = 'PENDING'
    ORDER BY q.expires_at LIMIT $1 FOR UPDATE OF q, n SKIP LOCKED
), expired AS (
    UPDATE notifications n
    SET status = 'EXPIRED', expired_at = now(), updated_at = now()
    -- By primary key, as in claim_channel.sql: a join to due could read the whole table.
    WHERE n.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING n.id, n.attempt_count, n.redrive_count
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.expired', id, 'EXPIRED', attempt_count,
           redrive_count, now()
    FROM expired
    ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
)
SELECT count(*) AS expired FROM expired
