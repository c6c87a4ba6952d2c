-- Returns up to $2 expired claims to the queue ($1: the lease in seconds, for the error
-- text). A claim that expired on its final attempt gets one reconciliation attempt (the
-- provider may have delivered; resending with the same key confirms it); a second expiry
-- dead-letters it, with its webhook event in the same statement. The attempt the claim
-- spent gets its row in the attempt history (TEMPORARY: the answer, if the provider was
-- called at all, was never recorded), from the claim to now, under the worker that held it.
-- A claim whose person was erased or whose campaign was cancelled meanwhile is CANCELLED
-- instead, as erasure and a campaign's cancel cancel what waits. Read from queue_lease_expiry; both rows locked with SKIP LOCKED, as the claim does.
WITH expired AS (
    SELECT q.id, n.attempt_count, coalesce(n.claimed_by, 'unknown') AS worker,
           n.lease_expires_at - $1::int8 * interval '1 second' AS claimed_at,
           n.recipient = '[erased]'
               OR EXISTS (SELECT 1 FROM campaigns c
                          WHERE c.id = (n.payload #>> '{$template,campaign}')::uuid
                            AND c.status = 'CANCELLED') AS stopped
    FROM queue q JOIN notifications n ON n.id = q.id
    WHERE q.status = 'PROCESSING' AND q.lease_expires_at < now() AND n.status = 'PROCESSING'
    ORDER BY q.lease_expires_at LIMIT $2 FOR UPDATE OF q, n SKIP LOCKED
), recovered AS (
    UPDATE notifications n
    SET status = CASE WHEN expired.stopped THEN 'CANCELLED'
                      WHEN n.attempt_count >= n.max_attempts AND n.reconciliation_granted
                      THEN 'DEAD_LETTERED' ELSE 'PENDING' END,
        cancelled_at = CASE WHEN expired.stopped THEN now() ELSE n.cancelled_at END,
        dead_lettered_at = CASE WHEN n.attempt_count >= n.max_attempts
                                AND n.reconciliation_granted
                                AND NOT expired.stopped THEN now() END,
        max_attempts = CASE WHEN n.attempt_count >= n.max_attempts
                            AND NOT n.reconciliation_granted
                            THEN n.max_attempts + 1 ELSE n.max_attempts END,
        reconciliation_granted = n.reconciliation_granted
                                 OR n.attempt_count >= n.max_attempts,
        next_attempt_at = now(),
        last_error = 'Claim expired after ' || $1::int8 || 's without completion',
        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
    -- Also by primary key, as in claim_channel.sql: joined to expired alone, the planner
    -- could read the whole table for a hash join.
    FROM expired WHERE n.id = expired.id AND n.id = ANY (ARRAY(SELECT id FROM expired))
    RETURNING n.id, n.status, n.attempt_count, n.redrive_count
), attempts AS (
    INSERT INTO delivery_attempts (notification_id, attempt, worker, started_at, finished_at,
                                   outcome, error)
    SELECT e.id, e.attempt_count, e.worker, e.claimed_at, now(), 'TEMPORARY',
           'Claim expired after ' || $1::int8 || 's without completion'
    FROM expired e JOIN recovered r ON r.id = e.id
), events AS (
    INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                redrive_generation, occurred_at)
    SELECT gen_random_uuid(), 'notification.dead_lettered', id, status, attempt_count,
           redrive_count, now()
    FROM recovered WHERE status = 'DEAD_LETTERED'
    ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
)
SELECT count(*) FILTER (WHERE status = 'PENDING') AS requeued,
       count(*) FILTER (WHERE status = 'DEAD_LETTERED') AS dead_lettered
FROM recovered
