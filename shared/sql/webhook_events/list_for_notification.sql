-- The webhook events of notification $1 and their dispatch, one row per destination, oldest
-- first. An event sent to several endpoints is its own row (the first endpoint's) and a copy
-- per other endpoint, found by its event_id (webhook_events_copies); a copy holds no
-- transition of its own, so it shows the original's.
-- (webhook_events_one_per_transition leads with notification_id.)
WITH originals AS (
    SELECT id, type, status, attempt_count, redrive_generation, occurred_at, dispatch_state,
           dispatch_attempts, next_dispatch_at, last_error, delivered_at, given_up_at,
           endpoint_id
    FROM webhook_events
    WHERE notification_id = $1
)
SELECT id AS event_id, type, status, attempt_count, redrive_generation, occurred_at,
       dispatch_state, dispatch_attempts, next_dispatch_at, last_error, delivered_at,
       given_up_at, endpoint_id, id AS row_id
FROM originals
UNION ALL
SELECT o.id, o.type, o.status, o.attempt_count, o.redrive_generation, o.occurred_at,
       c.dispatch_state, c.dispatch_attempts, c.next_dispatch_at, c.last_error,
       c.delivered_at, c.given_up_at, c.endpoint_id, c.id
FROM originals o
JOIN webhook_events c ON c.event_id = o.id
ORDER BY occurred_at, event_id, row_id
