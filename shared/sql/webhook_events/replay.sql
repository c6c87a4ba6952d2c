-- Sends up to $4 GIVEN_UP events again, oldest first: PENDING, due now, with a fresh set
-- of attempts; their id (the eventId receivers dedupe on) is kept. Only rows of endpoint
-- $2 when given, of the endpoints of owner $1 when given (a client), created at or after
-- $3 when given. Events of a deleted endpoint stay given up: they have nowhere to go.
WITH chosen AS (
    SELECT e.id
    FROM webhook_events e
    LEFT JOIN webhook_endpoints w ON w.id = e.endpoint_id
    WHERE e.dispatch_state = 'GIVEN_UP'
      AND (e.endpoint_id IS NULL OR w.id IS NOT NULL)
      AND ($1::uuid IS NULL OR w.owner_key_id = $1)
      AND ($2::uuid IS NULL OR e.endpoint_id = $2)
      AND ($3::timestamptz IS NULL OR e.created_at >= $3)
    ORDER BY e.created_at, e.id
    LIMIT $4
    FOR UPDATE OF e SKIP LOCKED
)
UPDATE webhook_events e
SET dispatch_state = 'PENDING',
    dispatch_attempts = 0,
    next_dispatch_at = now(),
    given_up_at = NULL
FROM chosen c
WHERE e.id = c.id
RETURNING e.id
