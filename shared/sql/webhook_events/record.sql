-- Records a batch of dispatch outcomes. Each row changes only if it is still DISPATCHING
-- with the attempt given. A delivered event keeps the last failure's last_error for
-- diagnosis. Parallel arrays: $1 ids, $2 attempts, $3 new states, $4 errors, $5 retry
-- delays (ms, for PENDING), $6 refunds (released unsent: the attempt is given back).
UPDATE webhook_events e
SET dispatch_state = r.state,
    dispatch_attempts = CASE WHEN r.refund THEN e.dispatch_attempts - 1
                             ELSE e.dispatch_attempts END,
    lease_expires_at = NULL,
    next_dispatch_at = CASE WHEN r.state = 'PENDING'
        THEN now() + r.delay_ms * interval '1 millisecond'
        ELSE e.next_dispatch_at END,
    last_error = coalesce(r.error, e.last_error),
    delivered_at = CASE WHEN r.state = 'DELIVERED' THEN now() END,
    given_up_at = CASE WHEN r.state = 'GIVEN_UP' THEN now() END
FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::text[], $5::int8[], $6::bool[])
    AS r(id, attempt, state, error, delay_ms, refund)
WHERE e.id = r.id AND e.dispatch_attempts = r.attempt
  AND e.dispatch_state = 'DISPATCHING'
