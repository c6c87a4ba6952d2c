-- Turns up to $1 PENDING notifications whose expiresAt has passed into EXPIRED, soonest
-- expired first (read from the partial index notifications_expiry), each with its webhook
-- event in the same statement. The claim already skips them; this makes the final status
-- visible and the event sent. Returns how many expired.
WITH due AS (
    SELECT id FROM notifications
    WHERE status = 'PENDING' AND expires_at IS NOT NULL AND expires_at <= now()
    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE notifications n
    SET status = 'EXPIRED', expired_at = now(), updated_at = now()
    FROM due WHERE n.id = due.id
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
