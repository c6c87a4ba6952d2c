-- The webhook events of notification $1 and their dispatch, oldest first
-- (webhook_events_one_per_transition leads with notification_id).
SELECT id, type, status, attempt_count, redrive_generation, occurred_at, dispatch_state,
       dispatch_attempts, next_dispatch_at, last_error, delivered_at, given_up_at
FROM webhook_events
WHERE notification_id = $1
ORDER BY occurred_at, id
