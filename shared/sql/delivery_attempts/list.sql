-- The provider calls of notification $1, oldest first.
SELECT attempt, started_at, finished_at, outcome, provider_message_id, error, delivered_at
FROM delivery_attempts
WHERE notification_id = $1
ORDER BY id
