-- Claims up to $1 due events, oldest due first: PENDING ones whose next_dispatch_at has
-- come, and DISPATCHING ones whose lease expired (their drainer died). Each becomes
-- DISPATCHING until now() + $2 ms, with the dispatch attempt counted.
--
-- While an event is DISPATCHING its next_dispatch_at is its lease expiry, so one condition
-- on the partial index webhook_events_due finds both kinds without scanning live leases.
-- An expired lease on the final attempt (dispatch_attempts >= $3) is given up with
-- last_error $4 rather than sent again, so an event that kills every drainer still runs
-- out of attempts.
--
-- Only routed events are claimed (see route.sql; a DISPATCHING one was routed, or claimed
-- before routing existed, for the default URL). Each comes with its destination: the
-- endpoint's URL and secrets (the rotated ones while they still sign), or none for the
-- default URL; endpoint_found is false when its endpoint was deleted since.
WITH due AS (
    SELECT id, endpoint_id,
           dispatch_state = 'DISPATCHING' AND dispatch_attempts >= $3 AS give_up
    FROM webhook_events
    WHERE dispatch_state IN ('PENDING', 'DISPATCHING') AND next_dispatch_at <= now()
      AND (dispatch_state = 'PENDING' OR lease_expires_at <= now())
      AND (routed_at IS NOT NULL OR dispatch_state = 'DISPATCHING')
    ORDER BY next_dispatch_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE webhook_events e
SET dispatch_state = CASE WHEN d.give_up THEN 'GIVEN_UP' ELSE 'DISPATCHING' END,
    dispatch_attempts = CASE WHEN d.give_up THEN e.dispatch_attempts
                             ELSE e.dispatch_attempts + 1 END,
    lease_expires_at = CASE WHEN d.give_up THEN NULL
                            ELSE now() + $2::int8 * interval '1 millisecond' END,
    next_dispatch_at = CASE WHEN d.give_up THEN e.next_dispatch_at
                            ELSE now() + $2::int8 * interval '1 millisecond' END,
    given_up_at = CASE WHEN d.give_up THEN now() END,
    last_error = CASE WHEN d.give_up THEN $4 ELSE e.last_error END
FROM due d LEFT JOIN webhook_endpoints w ON w.id = d.endpoint_id
-- The rows are also named by primary key, as in notifications/claim_channel.sql: joined
-- to due alone, the planner could read the whole table for a hash join.
WHERE e.id = d.id AND e.id = ANY (ARRAY(SELECT id FROM due))
RETURNING e.id, coalesce(e.event_id, e.id) AS event_id, e.type, e.notification_id, e.status,
          e.attempt_count, e.body, e.occurred_at, e.dispatch_attempts, e.next_dispatch_at,
          d.give_up, e.endpoint_id, w.id IS NOT NULL AS endpoint_found, w.url, w.secret,
          -- The rotated-out secrets still inside their day, and one a process of the
          -- release before V27 rotated out (kept only in previous_secret).
          ARRAY(SELECT p.secret
                FROM unnest(w.previous_secrets, w.previous_secrets_valid_until)
                     AS p(secret, valid_until)
                WHERE p.valid_until > now()
                UNION
                SELECT w.previous_secret WHERE w.previous_secret_valid_until > now())
              AS previous_secrets
