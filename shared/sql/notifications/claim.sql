-- Claims up to $1 due notifications for worker $2 with a lease of $3 ms: HIGH, then
-- NORMAL, then LOW; within a priority the longest-due first, then the oldest. Each
-- priority is read from the top of the partial index notifications_claim_order, so future
-- and finished rows are never scanned. The attempt is counted here, so a notification that
-- crashes every worker still runs out of attempts. Commits on its own: no lock outlives it.
WITH high AS (
    SELECT id FROM notifications
    WHERE priority = 0 AND status = 'PENDING' AND next_attempt_at <= now()
      AND attempt_count < max_attempts
    ORDER BY next_attempt_at, created_at LIMIT $1 FOR UPDATE SKIP LOCKED
), normal AS (
    SELECT id FROM notifications
    WHERE priority = 1 AND status = 'PENDING' AND next_attempt_at <= now()
      AND attempt_count < max_attempts
    ORDER BY next_attempt_at, created_at
    LIMIT $1 - (SELECT count(*) FROM high) FOR UPDATE SKIP LOCKED
), low AS (
    SELECT id FROM notifications
    WHERE priority = 2 AND status = 'PENDING' AND next_attempt_at <= now()
      AND attempt_count < max_attempts
    ORDER BY next_attempt_at, created_at
    LIMIT $1 - (SELECT count(*) FROM high) - (SELECT count(*) FROM normal) FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT id FROM high UNION ALL SELECT id FROM normal UNION ALL SELECT id FROM low
)
UPDATE notifications n
SET status = 'PROCESSING', claim_token = gen_random_uuid(), claimed_by = $2,
    lease_expires_at = now() + $3::int8 * interval '1 millisecond',
    attempt_count = n.attempt_count + 1, updated_at = now()
FROM picked WHERE n.id = picked.id
RETURNING n.id, n.claim_token, n.recipient, n.channel, n.priority, n.payload,
          n.attempt_count, n.max_attempts, n.next_attempt_at, n.created_at
