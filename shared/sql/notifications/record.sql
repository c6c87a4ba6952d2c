-- Records a batch of results: each row only if still PROCESSING with the token given,
-- clearing the claim. Final outcomes write their webhook event in the same statement, so
-- neither exists without the other. Parallel arrays: $1 ids, $2 tokens, $3 new statuses,
-- $4 errors, $5 retry delays (ms, for PENDING).
WITH results AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[])
        AS r(id, token, status, error, retry_delay_ms)
), recorded AS (
    UPDATE notifications n
    SET status = r.status,
        last_error = r.error,
        next_attempt_at = CASE WHEN r.status = 'PENDING'
            THEN now() + r.retry_delay_ms * interval '1 millisecond'
            ELSE n.next_attempt_at END,
        sent_at = CASE WHEN r.status = 'SENT' THEN now() END,
        failed_at = CASE WHEN r.status = 'FAILED' THEN now() END,
        dead_lettered_at = CASE WHEN r.status = 'DEAD_LETTERED' THEN now() END,
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
        updated_at = now()
    FROM results r
    WHERE n.id = r.id AND n.claim_token = r.token AND n.status = 'PROCESSING'
    RETURNING n.id, n.status, n.attempt_count, n.redrive_count
), events AS (
    INSERT INTO webhook_events (id, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), id, status, attempt_count, redrive_count, now()
    FROM recorded WHERE status IN ('SENT', 'FAILED', 'DEAD_LETTERED')
    ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM recorded) AS recorded, (SELECT count(*) FROM events) AS events
